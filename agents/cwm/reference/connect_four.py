"""A code world model of connect four in the CWM API (states {"history", "text"})."""

ROWS, COLS = 6, 7


def _board(history):
    grid = [["."] * COLS for _ in range(ROWS)]  # row 0 is the bottom
    for i, action in enumerate(history):
        col = int(action[1:])
        for row in range(ROWS):
            if grid[row][col] == ".":
                grid[row][col] = "x" if i % 2 == 0 else "o"
                break
    return grid


def _winner(grid):
    for r in range(ROWS):
        for c in range(COLS):
            mark = grid[r][c]
            if mark == ".":
                continue
            for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
                if all(
                    0 <= r + k * dr < ROWS and 0 <= c + k * dc < COLS and grid[r + k * dr][c + k * dc] == mark
                    for k in range(4)
                ):
                    return mark
    return None


def _text(grid):
    return "".join("".join(grid[r]) + "\n" for r in reversed(range(ROWS)))


def get_current_player(state):
    grid = _board(state["history"])
    if _winner(grid) or len(state["history"]) == ROWS * COLS:
        return -4
    return len(state["history"]) % 2


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    w = _winner(_board(state["history"]))
    return [1.0, -1.0] if w == "x" else [-1.0, 1.0] if w == "o" else [0.0, 0.0]


def get_legal_actions(state):
    p = get_current_player(state)
    if p < 0:
        return []
    grid = _board(state["history"])
    return [f"{'xo'[p]}{c}" for c in range(COLS) if grid[ROWS - 1][c] == "."]


def apply_action(state, action):
    history = state["history"] + [action]
    return {"history": history, "text": _text(_board(history))}


def get_observations(state):
    text = _text(_board(state["history"]))
    return [text, text]
