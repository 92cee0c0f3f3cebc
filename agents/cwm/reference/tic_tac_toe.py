"""A code world model of tic-tac-toe in the CWM API (states {"history", "text"})."""

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def _board(state):
    cells = ["."] * 9
    for i, action in enumerate(state["history"]):
        r, c = int(action[2]), int(action[4])
        cells[3 * r + c] = "x" if i % 2 == 0 else "o"
    return cells


def _winner(cells):
    for a, b, c in LINES:
        if cells[a] != "." and cells[a] == cells[b] == cells[c]:
            return cells[a]
    return None


def _text(cells):
    return "\n".join("".join(cells[3 * r : 3 * r + 3]) for r in range(3))


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
    return [f"{mark}({i // 3},{i % 3})" for i, c in enumerate(_board(state)) if c == "."]


def apply_action(state, action):
    history = state["history"] + [action]
    return {"history": history, "text": _text(_board({"history": history}))}


def get_observations(state):
    text = _text(_board(state))
    return [text, text]
