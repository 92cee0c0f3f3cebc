"""Opening sets for chess tournaments: each entry a FEN or a move sequence from the start.

A move sequence is SAN or UCI moves separated by spaces (move numbers like `1.` and
`1...` are skipped): `"e4 e5 Nf3 Nc6"`, `"1. d4 d5 2. c4"`, `"e2e4 c7c5"`. It is
played with python-chess; a match starts from the FEN of the position it reaches,
and the moves travel with it as the `opening` game parameter (UCI, space-separated)
so that PGN exports the game from the start position (referee/pgn.py). The moves
are not replayed in the match itself, so a repetition count starts at the FEN.
An entry with a '/' is a FEN and must be a legal position.
"""

from __future__ import annotations

import re

import chess

from games.chess.position import BadFen, check_fen

_MOVE_NUMBER = re.compile(r"^\d+\.+$|^\d+\.+(?=\S)")


def _moves(text: str) -> list[chess.Move]:
    board = chess.Board()
    moves: list[chess.Move] = []
    for i, token in enumerate(text.split(), 1):
        move_text = _MOVE_NUMBER.sub("", token)
        if not move_text:
            continue
        try:
            move = board.parse_san(move_text)
        except ValueError:
            try:
                move = board.parse_uci(move_text)
            except ValueError:
                raise ValueError(
                    f"opening {text!r}: move {i} {move_text!r} is not legal in {board.fen()}"
                ) from None
        board.push(move)
        moves.append(move)
    if board.is_game_over():
        raise ValueError(f"opening {text!r} ends the game")
    return moves


def normalize_opening(text: str) -> str:
    """An opening entry checked and written one way: its FEN, or its moves in UCI; ValueError
    saying what is wrong."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("an opening must be a FEN or a move sequence")
    if "/" in text:
        try:
            board = check_fen(text.strip())
        except BadFen as exc:
            raise ValueError(str(exc)) from None
        if board.is_game_over():
            raise ValueError(f"opening {text!r} is already over")
        return board.fen()
    return " ".join(m.uci() for m in _moves(text))


def opening_params(text: str) -> dict[str, str]:
    """The chess game parameters of an opening entry: `fen`, plus `opening` (its moves in UCI) when
    the entry is a move sequence."""
    entry = normalize_opening(text)
    if "/" in entry:
        return {"fen": entry}
    board = chess.Board()
    for move in entry.split():
        board.push_uci(move)
    return {"fen": board.fen(), "opening": entry} if entry else {"fen": board.fen()}


def opening_fen(text: str) -> str:
    """The FEN an opening entry starts from; ValueError saying what is wrong."""
    return opening_params(text)["fen"]
