"""A code world model of generalized chess `army5x5a` (5x5, general / infantry / cavalry, the
general is the target, 100 moves then a draw) in the CWM API (states {"history", "text"})."""

SIZE = 5
ROWS = "ABCDE"
MAX_PLIES = 100
START = "".join(["V.X.V", "IIIII", ".....", "iiiii", "v.x.v"])
OFFSETS = {
    "X": [(1, 0), (-1, 0), (0, 1), (0, -1), (0, -2), (0, 2)],
    "I": [(1, 0), (2, 0), (1, -1), (1, 1), (-1, 0)],
    "V": [(0, 3), (1, 2), (2, 1), (3, 0)],
}


def _owner(piece):
    if piece == ".":
        return None
    return 0 if piece.isupper() else 1


def _square(name):
    return ROWS.index(name[0]) * SIZE + int(name[1]) - 1


def _name(sq):
    return f"{ROWS[sq // SIZE]}{sq % SIZE + 1}"


def _replay(history):
    """Board, player to move, winner (None) after the history's moves."""
    board = list(START)
    winner = None
    for i, move in enumerate(history):
        if move != "PASS":
            frm, to = move.split("_to_")
            frm, to = _square(frm), _square(to)
            if board[to].upper() == "X":
                winner = i % 2
            board[to], board[frm] = board[frm], "."
    return board, len(history) % 2, winner


def _piece_moves(board, player):
    sign = 1 if player == 0 else -1
    out = set()
    for sq, piece in enumerate(board):
        if _owner(piece) != player:
            continue
        row, col = divmod(sq, SIZE)
        for dr, dc in OFFSETS[piece.upper()]:
            r, c = row + sign * dr, col + sign * dc
            if 0 <= r < SIZE and 0 <= c < SIZE and _owner(board[r * SIZE + c]) != player:
                out.add((sq, r * SIZE + c))
    return [f"{_name(a)}_to_{_name(b)}" for a, b in sorted(out)]


def _over(history, winner):
    return winner is not None or len(history) >= MAX_PLIES


def _rows(board):
    return ["".join(board[r * SIZE : (r + 1) * SIZE]) for r in range(SIZE)]


def get_current_player(state):
    _, player, winner = _replay(state["history"])
    return -4 if _over(state["history"], winner) else player


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    _, _, winner = _replay(state["history"])
    if winner is None:
        return [0.0, 0.0]
    return [1.0, -1.0] if winner == 0 else [-1.0, 1.0]


def get_legal_actions(state):
    board, player, winner = _replay(state["history"])
    if _over(state["history"], winner):
        return []
    return _piece_moves(board, player) or ["PASS"]


def apply_action(state, action):
    history = state["history"] + [action]
    board, _, _ = _replay(history)
    return {"history": history, "text": "\n".join(_rows(board))}


def _view(history, board, player, winner, seat):
    case = "upper-case" if seat == 0 else "lower-case"
    lines = [f"Generalized chess (army5x5a). You are player {seat} ({case} pieces).", "  12345"]
    lines += [f"{ROWS[r]} {row}" for r, row in enumerate(_rows(board))]
    lines.append(f"Moves made: {len(history)} of {MAX_PLIES}.")
    if history:
        lines.append(f"Last move: {history[-1]}.")
    if winner is not None:
        lines.append(f"Game over: player {winner} captured the general and wins.")
    elif len(history) >= MAX_PLIES:
        lines.append(f"Game over: {MAX_PLIES} moves without a captured general, a draw.")
    else:
        lines.append(f"Turn: {'you' if player == seat else f'player {player}'}.")
    return "\n".join(lines)


def get_observations(state):
    board, player, winner = _replay(state["history"])
    return [_view(state["history"], board, player, winner, seat) for seat in range(2)]
