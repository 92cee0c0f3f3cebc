"""games/chess/uci.py against pyspiel itself: every legal id of OpenSpiel's chess maps to a
python-chess legal move and back, with the same SAN, on random games and on positions
chosen to hold castling (both sides, both colours), en passant and every (under)promotion."""

from __future__ import annotations

import random

import chess
import pyspiel
import pytest

from games.chess import uci

SPECIAL = [
    "r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1",  # castling both ways, white
    "r3k2r/8/8/8/8/8/8/R3K2R b KQkq - 0 1",  # and black
    "4k3/8/8/3pP3/8/8/8/4K3 w - d6 0 1",  # en passant, white
    "4k3/8/8/8/3Pp3/8/8/4K3 b - d3 0 1",  # en passant, black
    "1n2k3/P1P5/8/8/8/8/8/4K3 w - - 0 1",  # promotions straight and capturing, every piece
    "4k3/8/8/8/8/8/p1p5/1N2K3 b - - 0 1",  # and black's
]


def _check_position(state: pyspiel.State, board: chess.Board) -> None:
    ids = sorted(state.legal_actions())
    assert ids == sorted(uci.move_to_action(board, m) for m in board.legal_moves)
    for a in ids:
        move = uci.action_to_move(board, a)
        assert uci.move_to_action(board, move) == a
        assert board.san(move) == state.action_to_string(state.current_player(), a), (board.fen(), a)


@pytest.mark.parametrize("fen", SPECIAL)
def test_special_moves_map_exactly(fen: str) -> None:
    game = pyspiel.load_game("chess")
    state, board = game.new_initial_state(fen), chess.Board(fen)
    _check_position(state, board)
    kinds = {
        "castle": any(board.is_castling(m) for m in board.legal_moves),
        "ep": any(board.is_en_passant(m) for m in board.legal_moves),
        "under": any(m.promotion not in (None, chess.QUEEN) for m in board.legal_moves),
    }
    assert any(kinds.values())
    # Playing each special move in both libraries reaches the same position.
    for a in state.legal_actions():
        move = uci.action_to_move(board, a)
        if board.is_castling(move) or board.is_en_passant(move) or move.promotion:
            child, b2 = state.clone(), board.copy()
            child.apply_action(a)
            b2.push(move)
            assert str(child).split()[:3] == b2.fen().split()[:3]


def test_random_games_property() -> None:
    """Lockstep random play (seeded): every position's whole legal set maps both ways."""
    game = pyspiel.load_game("chess")
    rng = random.Random(14)
    positions = 0
    for _ in range(12):
        state, board = game.new_initial_state(), chess.Board()
        while not state.is_terminal() and positions < 1500:
            _check_position(state, board)
            positions += 1
            a = rng.choice(state.legal_actions())
            board.push(uci.action_to_move(board, a))
            state.apply_action(a)
            assert str(state).split()[:3] == board.fen().split()[:3]
    assert positions > 500


def test_bad_ids_refused() -> None:
    board = chess.Board()
    for bad in (-1, uci.NUM_ACTIONS, uci.LEFT_CASTLING, 0):
        with pytest.raises(uci.ActionError):
            uci.action_to_move(board, bad)
    with pytest.raises(uci.ActionError):
        uci.uci_to_action(board, "e2e5")
    with pytest.raises(uci.ActionError):
        uci.uci_to_action(board, "zz")
