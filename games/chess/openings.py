"""Opening sets for chess tournaments: each entry a FEN or a move sequence from the start.

A move sequence is SAN or UCI moves separated by spaces (move numbers like `1.` and
`1...` are skipped): `"e4 e5 Nf3 Nc6"`, `"1. d4 d5 2. c4"`, `"e2e4 c7c5"`. It is
played with python-chess and becomes the FEN of the position it reaches (the
moves themselves are not replayed in the match, so a repetition count starts
there). An entry with a '/' is a FEN and must be a legal position.
"""

from __future__ import annotations

import re

import chess

from games.chess.position import BadFen, check_fen

_MOVE_NUMBER = re.compile(r"^\d+\.+$|^\d+\.+(?=\S)")


def opening_fen(text: str) -> str:
    """The FEN an opening entry starts from; ValueError saying what is wrong."""
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
    board = chess.Board()
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
    if board.is_game_over():
        raise ValueError(f"opening {text!r} ends the game")
    return board.fen()
