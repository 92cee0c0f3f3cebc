"""OpenSpiel chess action ids <-> python-chess moves (UCI), exactly, without pyspiel.

OpenSpiel encodes a move AlphaZero-style, from the mover's point of view (ranks
reflected for black): `(file * 8 + rank) * 73 + destination`, where destination
0..8 are underpromotions (piece rook, bishop, knight x direction straight, +file,
-file) and 9..72 are queen-like moves (vertical, horizontal, two diagonals: 14
distances each) then the 8 knight jumps. A queen promotion is the plain pawn
move. Castling has two ids of its own after the 64 x 73 block: 4672 queenside
(O-O-O, OpenSpiel's "left castling"), 4673 kingside (O-O), for either colour
(open_spiel 2.0.2; tests/test_chess_uci.py checks every id against pyspiel). En
passant is the pawn's diagonal move. The tables are OpenSpiel's (chess_common.h).

Limits: standard chess only (no chess960 castling, whose king may move one
square or none); `board` must be the position the action is played in, since
the id alone does not name the side or the piece.
"""

from __future__ import annotations

import chess

NUM_DESTINATIONS = 73
NUM_UNDERPROMOTIONS = 9
LEFT_CASTLING = 64 * NUM_DESTINATIONS
RIGHT_CASTLING = LEFT_CASTLING + 1
NUM_ACTIONS = RIGHT_CASTLING + 1
# OpenSpiel's kUnderPromotionIndexToType and kUnderPromotionDirectionToOffset (x offsets).
_UNDERPROMOTION_PIECES = (chess.ROOK, chess.BISHOP, chess.KNIGHT)
_UNDERPROMOTION_DX = (0, 1, -1)
# OpenSpiel's kKnightOffsets, (dx, dy).
_KNIGHT_OFFSETS = ((-2, -1), (-2, 1), (-1, -2), (-1, 2), (2, -1), (2, 1), (1, -2), (1, 2))


class ActionError(ValueError):
    """An id that is no move in this position, or a move that has no id."""


def _diff_index(diff: int) -> int:
    return diff + 7 - (1 if diff > 0 else 0)


def _index_diff(index: int) -> int:
    diff = index - 7
    return diff + 1 if diff >= 0 else diff


def _offset_index(dx: int, dy: int) -> int:
    if dx == 0:
        return 0 * 14 + _diff_index(dy)
    if dy == 0:
        return 1 * 14 + _diff_index(dx)
    if dx == dy:
        return 2 * 14 + _diff_index(dx)
    if dx == -dy:
        return 3 * 14 + _diff_index(dx)
    try:
        return 4 * 14 + _KNIGHT_OFFSETS.index((dx, dy))
    except ValueError:
        raise ActionError(f"offset ({dx}, {dy}) is no chess move") from None


def _index_offset(index: int) -> tuple[int, int]:
    move_type, rest = divmod(index, 14)
    if move_type == 4:
        if rest >= len(_KNIGHT_OFFSETS):
            raise ActionError(f"destination index {index} out of range")
        return _KNIGHT_OFFSETS[rest]
    diff = _index_diff(rest)
    return ((0, diff), (diff, 0), (diff, diff), (diff, -diff))[move_type]


def _reflect(rank: int, color: chess.Color) -> int:
    return rank if color == chess.WHITE else 7 - rank


def move_to_action(board: chess.Board, move: chess.Move) -> int:
    """The OpenSpiel action id of `move` (which must be legal in `board`)."""
    if not board.is_legal(move):
        raise ActionError(f"{move.uci()} is not legal in {board.fen()}")
    if board.is_castling(move):
        return RIGHT_CASTLING if board.is_kingside_castling(move) else LEFT_CASTLING
    color = board.turn
    fx, fy = chess.square_file(move.from_square), _reflect(chess.square_rank(move.from_square), color)
    tx, ty = chess.square_file(move.to_square), _reflect(chess.square_rank(move.to_square), color)
    start = (fx * 8 + fy) * NUM_DESTINATIONS
    if move.promotion is not None and move.promotion != chess.QUEEN:
        piece = _UNDERPROMOTION_PIECES.index(move.promotion)
        direction = _UNDERPROMOTION_DX.index(tx - fx)
        return start + 3 * piece + direction
    return start + NUM_UNDERPROMOTIONS + _offset_index(tx - fx, ty - fy)


def action_to_move(board: chess.Board, action: int) -> chess.Move:
    """The python-chess move of OpenSpiel `action` in `board`; ActionError if it is not legal there."""
    if not 0 <= action < NUM_ACTIONS:
        raise ActionError(f"action {action} is outside 0..{NUM_ACTIONS - 1}")
    if action in (LEFT_CASTLING, RIGHT_CASTLING):
        for move in board.legal_moves:
            if board.is_castling(move) and board.is_kingside_castling(move) == (action == RIGHT_CASTLING):
                return move
        raise ActionError(f"action {action} (castling) is not legal in {board.fen()}")
    color = board.turn
    xy, dest = divmod(action, NUM_DESTINATIONS)
    fx, fy = divmod(xy, 8)
    promotion = None
    if dest < NUM_UNDERPROMOTIONS:
        piece, direction = divmod(dest, 3)
        promotion = _UNDERPROMOTION_PIECES[piece]
        dx, dy = _UNDERPROMOTION_DX[direction], 1
    else:
        dx, dy = _index_offset(dest - NUM_UNDERPROMOTIONS)
    tx, ty = fx + dx, fy + dy
    if not (0 <= tx < 8 and 0 <= ty < 8):
        raise ActionError(f"action {action} leaves the board")
    from_sq = chess.square(fx, _reflect(fy, color))
    to_sq = chess.square(tx, _reflect(ty, color))
    if promotion is None and board.piece_type_at(from_sq) == chess.PAWN and ty == 7:
        promotion = chess.QUEEN
    move = chess.Move(from_sq, to_sq, promotion)
    if not board.is_legal(move):
        raise ActionError(f"action {action} ({move.uci()}) is not legal in {board.fen()}")
    return move


def uci_to_action(board: chess.Board, uci: str) -> int:
    try:
        move = chess.Move.from_uci(uci)
    except (ValueError, chess.InvalidMoveError) as exc:
        raise ActionError(f"{uci!r} is not a UCI move") from exc
    return move_to_action(board, move)


def board_from_history(start_fen: str | None, actions: list[int]) -> chess.Board:
    """The python-chess board (with its move stack, so repetitions count) after `actions`."""
    board = chess.Board(start_fen) if start_fen else chess.Board()
    for a in actions:
        board.push(action_to_move(board, a))
    return board
