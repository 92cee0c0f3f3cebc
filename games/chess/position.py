"""Chess from a start position: the `fen` game parameter.

open_spiel 2.0.2's chess has no `fen` parameter, but its states can start from
one (`game.new_initial_state(fen)`). `load_chess_from_fen` loads plain chess
(with the other parameters) and remembers the FEN for that game object;
`games.loader.initial_state` starts there. The FEN is checked with python-chess
first (OpenSpiel accepts, e.g., a board without kings).

This module knows nothing of `games.loader` (which imports it): a bad `fen` is a
`BadFen`, which the loader turns into its `GameSpecError`.

Limit: the remembered FEN lives in this process; the spec (`chess(fen=...)`)
is what travels on the bus, and every process loads it the same way.
"""

from __future__ import annotations

import chess
import pyspiel

# id(game) -> (game, fen): the game is kept alive so that its id is never reused.
_START: dict[int, tuple[pyspiel.Game, str]] = {}


class BadFen(ValueError):
    pass


def check_fen(fen: object) -> chess.Board:
    """A python-chess board of `fen`, or BadFen saying what is wrong."""
    if not isinstance(fen, str):
        raise BadFen(f"fen must be a string, got {type(fen).__name__}")
    try:
        board = chess.Board(fen)
    except ValueError as exc:
        raise BadFen(f"not a FEN: {fen!r} ({exc})") from None
    status = board.status()
    if status != chess.STATUS_VALID:
        flags = [f.name for f in chess.Status if f and status & f and f.name]
        raise BadFen(f"illegal position {fen!r}: {', '.join(flags).lower()}")
    return board


def replay_opening(moves: str) -> chess.Board:
    """The board after an `opening` parameter's UCI moves from the start; ValueError if one is
    illegal."""
    board = chess.Board()
    for uci in moves.split():
        try:
            board.push_uci(uci)
        except ValueError:
            raise ValueError(f"opening move {uci!r} is not legal in {board.fen()}") from None
    return board


def load_chess_from_fen(params: dict[str, object]) -> pyspiel.Game:
    """Plain chess with `params` but `fen` (and `opening`), starting at `fen`; BadFen if the FEN
    cannot be used, or if the `opening` moves (UCI, from the start: games/chess/openings.py) do not
    reach it."""
    rest = {k: v for k, v in params.items() if k not in ("fen", "opening")}
    board = check_fen(params["fen"])
    opening = params.get("opening")
    if opening is not None:
        try:
            reached = replay_opening(str(opening))
        except ValueError as exc:
            raise BadFen(f"opening: {exc}") from None
        if reached.fen() != board.fen():
            raise BadFen(f"the opening {opening!r} reaches {reached.fen()}, not the fen {board.fen()}")
    if rest.get("chess960"):
        raise BadFen("fen and chess960 cannot be combined")
    game = pyspiel.load_game("chess", rest)
    _START[id(game)] = (game, board.fen())
    return game


def start_fen(game: pyspiel.Game) -> str | None:
    entry = _START.get(id(game))
    return entry[1] if entry is not None and entry[0] is game else None
