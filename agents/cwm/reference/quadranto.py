"""A code world model of Quadranto (4x4, catch the other player, 20 moves then a draw) in the CWM
API (states {"history", "text"}), with the hidden-history inference function `resample_history`
(appendix H.3 / H.5): the seat's log gives its own moves and the opponent's quadrant after each
of the opponent's moves; the opponent's start and moves are sampled to fit them."""

import random

SIZE = 4
MAX_MOVES = 20
MOVES = ["Up", "Down", "Left", "Right", "Stay"]
STEP = {"Up": (-1, 0), "Down": (1, 0), "Left": (0, -1), "Right": (0, 1), "Stay": (0, 0)}
QUADRANTS = ["top-left", "top-right", "bottom-left", "bottom-right"]
START_QUADRANT = [0, 3]


def _quadrant(cell):
    row, col = divmod(cell, SIZE)
    return (row // 2) * 2 + col // 2


def _cell_text(cell):
    row, col = divmod(cell, SIZE)
    return f"(row {row}, column {col})"


def _parse_cell(text):
    inner = text[text.index("(") + 1 : text.index(")")]
    row, col = inner.replace("row ", "").replace("column ", "").split(", ")
    return int(row) * SIZE + int(col)


def _target(cell, move):
    row, col = divmod(cell, SIZE)
    dr, dc = STEP[move]
    r, c = row + dr, col + dc
    return r * SIZE + c if 0 <= r < SIZE and 0 <= c < SIZE else None


def _replay(history):
    """Positions, moves made, player to move, winner and the event log of the history."""
    pos, moves, player, winner, log = [None, None], 0, 0, None, []
    for action in history:
        if None in pos:
            who = pos.index(None)
            pos[who] = _parse_cell(action)
            log.append((None, {who: f"you start at {_cell_text(pos[who])}"}))
            continue
        mover, other = player, 1 - player
        target = _target(pos[mover], action)
        pos[mover] = target
        moves += 1
        mine = (
            f"you stayed at {_cell_text(target)}"
            if action == "Stay"
            else f"you moved {action} to {_cell_text(target)}"
        )
        if action != "Stay" and target == pos[other]:
            winner = mover
            log.append(
                (
                    f"player {mover} moved {action} onto {_cell_text(target)} and caught player {other}",
                    {mover: mine + f" and caught player {other}"},
                )
            )
            continue
        log.append(
            (f"player {mover} moved; it is in the {QUADRANTS[_quadrant(target)]} quadrant", {mover: mine})
        )
        player = other
    return pos, moves, player, winner, log


def _terminal(moves, winner):
    return winner is not None or moves >= MAX_MOVES


def get_current_player(state):
    pos, moves, player, winner, _ = _replay(state["history"])
    if _terminal(moves, winner):
        return -4
    if None in pos:
        return -1
    return player


def get_player_name(player_id):
    return {-1: "chance", -4: "terminal"}.get(player_id, str(player_id))


def get_rewards(state):
    _, _, _, winner, _ = _replay(state["history"])
    if winner is None:
        return [0.0, 0.0]
    return [1.0 if p == winner else -1.0 for p in range(2)]


def get_legal_actions(state):
    pos, moves, player, winner, _ = _replay(state["history"])
    if _terminal(moves, winner):
        return []
    if None in pos:
        who = pos.index(None)
        cells = [c for c in range(SIZE * SIZE) if _quadrant(c) == START_QUADRANT[who]]
        return [f"start at {_cell_text(c)}" for c in cells]
    return [m for m in MOVES if _target(pos[player], m) is not None]


def apply_action(state, action):
    history = state["history"] + [action]
    pos, moves, _, _, _ = _replay(history)
    return {"history": history, "text": f"player 0 at {pos[0]}, player 1 at {pos[1]}, {moves} moves"}


def _view(pos, moves, player, winner, log, seat):
    mine, theirs = pos[seat], pos[1 - seat]
    lines = [f"Quadranto. You are player {seat}."]
    if mine is None:
        lines.append("Players are being placed.")
    else:
        lines.append(f"You are at {_cell_text(mine)}, in the {QUADRANTS[_quadrant(mine)]} quadrant.")
        if theirs is not None:
            lines.append(f"The opponent is in the {QUADRANTS[_quadrant(theirs)]} quadrant.")
        lines.append("Map (Y you, ? the opponent's quadrant, X a catch):")
        for r in range(SIZE):
            row = ""
            for c in range(SIZE):
                cell = r * SIZE + c
                if winner is not None and cell == pos[winner]:
                    row += "X"
                elif cell == mine:
                    row += "Y"
                elif theirs is not None and _quadrant(cell) == _quadrant(theirs):
                    row += "?"
                else:
                    row += "."
            lines.append(row)
        lines.append(f"Moves made: {moves} of {MAX_MOVES}.")
        if winner is not None:
            lines.append(f"Game over: player {winner} caught player {1 - winner} and wins.")
        elif moves >= MAX_MOVES:
            lines.append(f"Game over: {MAX_MOVES} moves without a catch, a draw.")
        elif theirs is None:
            lines.append("The opponent is being placed.")
        else:
            lines.append(f"Turn: {'you' if player == seat else f'player {player}'}.")
    seen = [private.get(seat, public) for public, private in log]
    seen = [s for s in seen if s is not None]
    return (
        "\n".join(lines)
        + "\nWhat you have seen so far:\n"
        + "\n".join(f"{i + 1}. {s}" for i, s in enumerate(seen))
    )


def get_observations(state):
    return [_view(*_replay(state["history"]), seat) for seat in range(2)]


def _events(observation):
    """The seat's log lines, in order."""
    tail = observation.split("What you have seen so far:\n", 1)[1]
    return [line.split(". ", 1)[1] for line in tail.split("\n") if line.strip()]


def resample_history(obs_action_history, player_id, last_is_terminal=False):
    seat, opp = player_id, 1 - player_id
    events = _events(obs_action_history[-1][0])
    start, plan = None, []  # plan: ("me", move, caught) or ("opp", quadrant or None, catch move, cell)
    for e in events:
        if e.startswith("you start at "):
            start = _parse_cell(e)
        elif e.startswith("you stayed at "):
            plan.append(("me", "Stay", False))
        elif e.startswith("you moved "):
            plan.append(("me", e.split(" ")[2], e.endswith(f"caught player {opp}")))
        elif " and caught player " in e:
            plan.append(("opp", None, e.split(" ")[3], _parse_cell(e)))
        elif e.startswith(f"player {opp} moved;"):
            plan.append(("opp", QUADRANTS.index(e.split("in the ")[1].split(" quadrant")[0]), None, None))
    if start is None:  # not placed yet: any start of the seat's quadrant fits
        return []
    opp_cells = [c for c in range(SIZE * SIZE) if _quadrant(c) == START_QUADRANT[opp]]
    for _ in range(500):
        opp_start = random.choice(opp_cells)
        me, other, moves, ok = start, opp_start, [], True
        for step in plan:
            if step[0] == "me":
                _, move, caught = step
                me = _target(me, move)
                if (move != "Stay" and me == other) != caught:
                    ok = False
                    break
                moves.append(move)
                continue
            _, quadrant, catch, cell = step
            if catch is not None:  # the opponent's catching move is seen whole
                if _target(other, catch) != cell:
                    ok = False
                    break
                other = cell
                moves.append(catch)
                continue
            options = []
            for m in MOVES:
                t = _target(other, m)
                if t is not None and _quadrant(t) == quadrant and (m == "Stay" or t != me):
                    options.append(m)
            if not options:
                ok = False
                break
            move = random.choice(options)
            other = _target(other, move)
            moves.append(move)
        if ok:
            cells = [start, opp_start] if seat == 0 else [opp_start, start]
            return [f"start at {_cell_text(c)}" for c in cells] + moves
    return []
