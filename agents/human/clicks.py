"""Which clicks on a drawn board choose which legal action, for the human seat's page.

The board pictures (`games.pictures`) mark their clickable parts with a
`data-cell` key; here each legal action of a turn gets the sequence of keys that chooses it:

- tic-tac-toe: one click on the cell, key `"r,c"` (from the action text `x(r,c)`);
- connect four: one click anywhere in the column, key `"c"` (from `x3`);
- Go: one click on the point, key `"b1"` (from `B b1`; a pass is chosen from the list);
- chess: the from-square, then the to-square, keys `"e2"`, `"e4"` (from the FEN observation
  and the exact OpenSpiel action mapping of `games.chess.uci`). A promotion's four actions
  share their two squares: the page offers them in the list.

Limits: only those four games; any other game, or a view that does not parse, gets no
keys and is played from the legal move list. Keys are derived from the game's own texts
and the seat's own observation, never from anything the browser sent.
"""

from __future__ import annotations

import re

from bus.protocol import Turn

_TTT = re.compile(r"^[xo]\((\d+),(\d+)\)$")
_C4 = re.compile(r"^[xo](\d+)$")
_GO = re.compile(r"^[BW] ([a-z]+\d+)$")


def _by_text(turn: Turn, pattern: re.Pattern[str], key: str) -> dict[int, list[str]]:
    out = {}
    for la in turn.legal_actions:
        m = pattern.match(la.text.strip())
        if m is not None:
            out[la.id] = [key.format(*m.groups())]
    return out


def _chess(turn: Turn) -> dict[int, list[str]]:
    import chess

    from games.chess.uci import ActionError, action_to_move

    try:
        board = chess.Board(turn.observation.strip())
    except ValueError:
        return {}
    out = {}
    for la in turn.legal_actions:
        try:
            move = action_to_move(board, la.id)
        except ActionError:
            continue
        out[la.id] = [chess.square_name(move.from_square), chess.square_name(move.to_square)]
    return out


def click_cells(turn: Turn) -> dict[int, list[str]]:
    """Legal action id -> the `data-cell` keys clicked, in order, to choose it (absent: list only)."""
    game = turn.game.name
    if game == "tic_tac_toe":
        return _by_text(turn, _TTT, "{0},{1}")
    if game == "connect_four":
        return _by_text(turn, _C4, "{0}")
    if game == "go":
        return _by_text(turn, _GO, "{0}")
    if game == "chess":
        return _chess(turn)
    return {}
