"""A code world model of generalized tic-tac-toe (6x6, win length 4; OpenSpiel's
`mnk(m=6,n=6,k=4)`) in the CWM API (states {"history", "text"})."""

ROWS, COLS, K = 6, 6, 4
DIRECTIONS = [(0, 1), (1, 0), (1, 1), (1, -1)]


def _cell(action):
    r, c = action[2:-1].split(",")
    return int(r) * COLS + int(c)


def _board(state):
    cells = ["."] * (ROWS * COLS)
    for i, action in enumerate(state["history"]):
        cells[_cell(action)] = "x" if i % 2 == 0 else "o"
    return cells


def _winner(cells):
    for r in range(ROWS):
        for c in range(COLS):
            mark = cells[r * COLS + c]
            if mark == ".":
                continue
            for dr, dc in DIRECTIONS:
                rr, cc, n = r, c, 0
                while 0 <= rr < ROWS and 0 <= cc < COLS and cells[rr * COLS + cc] == mark and n < K:
                    rr, cc, n = rr + dr, cc + dc, n + 1
                if n >= K:
                    return mark
    return None


def _text(cells):
    return "\n".join("".join(cells[r * COLS : (r + 1) * COLS]) for r in range(ROWS))


def get_current_player(state):
    cells = _board(state)
    if _winner(cells) or "." not in cells:
        return -4
    return len(state["history"]) % 2


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    w = _winner(_board(state))
    if w == "x":
        return [1.0, -1.0]
    if w == "o":
        return [-1.0, 1.0]
    return [0.0, 0.0]


def get_legal_actions(state):
    p = get_current_player(state)
    if p < 0:
        return []
    mark = "xo"[p]
    return [f"{mark}({i // COLS},{i % COLS})" for i, c in enumerate(_board(state)) if c == "."]


def apply_action(state, action):
    history = state["history"] + [action]
    return {"history": history, "text": _text(_board({"history": history}))}


def get_observations(state):
    text = _text(_board(state))
    return [text, text]
