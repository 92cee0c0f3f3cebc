"""Generalized chess `army5x5a` (appendix I.5 of "Code World Models for General Game Playing"):
board, notation, every piece's moves for both players, captures, the target piece, PASS, the
move limit."""

from __future__ import annotations

import random

import pyspiel
import pytest

from games.cwm.army5x5a import PASS, move_name
from games.loader import load_game
from games.rules import rules_text
from games.view import json_view, observation_text

ACTIONS = {move_name(a): a for a in range(PASS + 1)}


def names(actions: list[int]) -> set[str]:
    return {move_name(a) for a in actions}


def position(rows: list[str], player: int = 0, game: str = "army5x5a") -> pyspiel.State:
    """A state with the given board (rows A-E) and player to move; the rules are the game's own."""
    state = load_game(game).new_initial_state()
    state.board = list("".join(rows))
    state.player = player
    return state


def targets(state: pyspiel.State, square: str) -> set[str]:
    return {n.split("_to_")[1] for n in names(state.legal_actions()) if n.startswith(square + "_")}


def test_start_position_notation_and_first_moves() -> None:
    game = load_game("army5x5a")
    assert game.num_distinct_actions() == 626
    state = game.new_initial_state()
    assert str(state).splitlines() == ["V.X.V", "IIIII", ".....", "iiiii", "v.x.v"]
    assert state.current_player() == 0
    assert names(state.legal_actions()) == {
        *("A1_to_A4", "A1_to_C2", "A1_to_D1", "A3_to_A2", "A3_to_A4", "A5_to_D5"),
        *("B1_to_C1", "B1_to_C2", "B1_to_D1", "B2_to_A2", "B2_to_C1", "B2_to_C2", "B2_to_C3", "B2_to_D2"),
        *("B3_to_C2", "B3_to_C3", "B3_to_C4", "B3_to_D3"),
        *("B4_to_A4", "B4_to_C3", "B4_to_C4", "B4_to_C5", "B4_to_D4", "B5_to_C4", "B5_to_C5", "B5_to_D5"),
    }
    assert "A1_to_B3" not in names(state.legal_actions())  # never onto an own piece
    assert state.action_to_string(0, ACTIONS["A2_to_C2"]) == "A2_to_C2"  # the appendix's example


def test_each_piece_moves_by_its_offsets_for_player_0() -> None:
    state = position([".....", ".....", "..X..", ".....", "x...."])
    assert targets(state, "C3") == {"D3", "B3", "C4", "C2", "C1", "C5"}  # general
    state = position([".....", ".....", "..I..", ".....", "x...X"])
    assert targets(state, "C3") == {"D3", "E3", "D2", "D4", "B3"}  # infantry, forward is towards E
    state = position(["V....", ".....", ".....", ".....", "x.X.."])
    assert targets(state, "A1") == {"A4", "B3", "C2", "D1"}  # cavalry


def test_player_1_uses_the_offsets_rotated() -> None:
    state = position(["X...x", ".....", "..i..", ".....", "....."], player=1)
    assert targets(state, "C3") == {"B3", "A3", "B4", "B2", "D3"}  # infantry, forward is towards A
    state = position(["X...x", ".....", ".....", ".....", "....v"], player=1)
    assert targets(state, "E5") == {"E2", "D3", "C4", "B5"}  # cavalry
    state = position(["X.x..", ".....", ".....", ".....", "....."], player=1)
    assert targets(state, "A3") == {"B3", "A2", "A4", "A1", "A5"}  # general; A1 takes player 0's general


def test_pieces_jump_and_capture_but_never_land_on_their_own() -> None:
    # Infantry C3 jumps over D3 to E3 (capturing), cannot take its own piece on D4.
    state = position([".....", ".....", "..I..", "..iI.", "x.v.X"])
    assert targets(state, "C3") == {"D3", "E3", "D2", "B3"}
    state.apply_action(ACTIONS["C3_to_E3"])
    assert str(state).splitlines()[4] == "x.I.X" and not state.is_terminal()
    assert state.current_player() == 1


def test_capturing_the_general_wins_at_once() -> None:
    state = position(["..X..", ".....", "..I..", "..x..", "....."])
    state.apply_action(ACTIONS["C3_to_D3"])
    assert state.is_terminal() and state.returns() == [1.0, -1.0] and state.legal_actions() == []
    assert "captured the general" in observation_text(state, 1)
    state = position(["..X..", "..i..", ".....", ".....", "..x.."], player=1)
    state.apply_action(ACTIONS["B3_to_A3"])
    assert state.returns() == [-1.0, 1.0]


def test_pass_only_without_a_piece_move() -> None:
    # Player 0's general and cavalry are boxed in by the board edge and each other.
    stuck = position(["x....", ".....", ".....", "...V.", ".VVXV"])
    assert stuck.legal_actions() == [PASS]
    stuck.apply_action(PASS)
    assert stuck.current_player() == 1 and stuck.plies == 1 and stuck.moves == ["PASS"]
    assert PASS not in load_game("army5x5a").new_initial_state().legal_actions()


def test_move_limit_is_a_draw() -> None:
    state = load_game("army5x5a(max_plies=4)").new_initial_state()
    for move in ("A3_to_A2", "E3_to_E4", "A2_to_A3", "E4_to_E3"):
        assert not state.is_terminal()
        state.apply_action(ACTIONS[move])
    assert state.is_terminal() and state.returns() == [0.0, 0.0]
    assert "4 moves without a captured general, a draw" in observation_text(state, 0)
    assert "If 4 moves in total" in rules_text(state.get_game())
    with pytest.raises(ValueError):
        load_game("army5x5a(max_plies=0)")


def test_illegal_move_is_refused() -> None:
    state = load_game("army5x5a").new_initial_state()
    with pytest.raises(ValueError, match="illegal move A1_to_B3"):
        state.apply_action(ACTIONS["A1_to_B3"])


def test_random_games_end_within_the_limit_with_a_general_taken_or_a_draw() -> None:
    rng = random.Random(5)
    game = load_game("army5x5a")
    for _ in range(100):
        state = game.new_initial_state()
        while not state.is_terminal():
            state.apply_action(rng.choice(state.legal_actions()))
        generals = "".join(state.board).count("X") + "".join(state.board).count("x")
        assert state.plies <= 100
        assert (generals == 1) == (state.returns() != [0.0, 0.0])


def test_views_and_rules_text() -> None:
    state = load_game("army5x5a").new_initial_state()
    state.apply_action(ACTIONS["B3_to_D3"])
    view = json_view(state, 1)
    assert view == {
        "board": ["V.X.V", "II.II", ".....", "iiIii", "v.x.v"],
        "rows": "ABCDE",
        "to_move": 1,
        "plies": 1,
        "max_plies": 100,
        "last_move": "B3_to_D3",
        "winner": None,
        "over": False,
    }
    assert "D iiIii" in observation_text(state, 1)
    text = rules_text(state.get_game())
    assert "'army5x5a'" in text and "'A2_to_C2'" in text and "PASS" in text and "general" in text
    assert "B3_to_D3" in state.information_state_string(0)
