"""Quadranto (appendix I.9 of "Code World Models for General Game Playing"): every rule the appendix
names, and that a seat knows only the opponent's quadrant."""

from __future__ import annotations

import pyspiel
import pytest

from games.cwm.quadranto import MOVES
from games.loader import load_game
from games.rules import rules_text
from games.view import SeatHistory, json_view, observation_text

UP, DOWN, LEFT, RIGHT, STAY = range(5)


def start(p0: int, p1: int, game: str = "quadranto") -> pyspiel.State:
    state = load_game(game).new_initial_state()
    state.apply_action(p0)
    state.apply_action(p1)
    return state


def test_random_start_in_opposite_quadrants() -> None:
    state = load_game("quadranto").new_initial_state()
    assert state.is_chance_node()
    assert state.chance_outcomes() == [(0, 0.25), (1, 0.25), (4, 0.25), (5, 0.25)]  # top-left
    state.apply_action(4)
    assert state.chance_outcomes() == [(10, 0.25), (11, 0.25), (14, 0.25), (15, 0.25)]  # bottom-right
    state.apply_action(15)
    assert state.current_player() == 0


def test_moves_stay_on_the_board_and_stay_is_always_legal() -> None:
    game = load_game("quadranto")
    assert game.num_distinct_actions() == 5 and [MOVES[a] for a in range(5)] == [
        "Up",
        "Down",
        "Left",
        "Right",
        "Stay",
    ]
    state = start(0, 15)
    assert state.legal_actions() == [DOWN, RIGHT, STAY]  # top-left corner
    with pytest.raises(ValueError, match="leaves the board"):
        state.apply_action(UP)
    state = start(5, 15)
    assert state.legal_actions() == [UP, DOWN, LEFT, RIGHT, STAY]
    state.apply_action(RIGHT)
    assert state.pos[0] == 6 and state.current_player() == 1
    assert state.legal_actions() == [UP, LEFT, STAY]  # player 1 in the bottom-right corner


def test_landing_on_the_opponent_wins() -> None:
    state = start(5, 10)
    for a in (DOWN, STAY, RIGHT):  # player 0 walks onto player 1's cell
        state.apply_action(a)
    assert state.is_terminal() and state.returns() == [1.0, -1.0]
    state = start(5, 10)
    state.apply_action(RIGHT)  # player 0 to (1,2)
    state.apply_action(UP)  # player 1 from (2,2) onto it
    assert state.is_terminal() and state.returns() == [-1.0, 1.0]
    assert "caught player 0" in state.information_state_string(0)


def test_twenty_moves_without_a_catch_draw_and_stay_counts() -> None:
    state = start(0, 15)
    for _ in range(19):
        state.apply_action(STAY)
    assert not state.is_terminal() and state.moves == 19
    state.apply_action(STAY)
    assert state.is_terminal() and state.returns() == [0.0, 0.0]
    assert "20 moves without a catch" in observation_text(state, 0)
    # A catch on the last move still wins.
    state = start(5, 10)
    for _ in range(18):
        state.apply_action(STAY)
    state.apply_action(DOWN)  # player 0 to (2,1), move 19
    state.apply_action(LEFT)  # player 1 from (2,2) onto it, move 20
    assert state.is_terminal() and state.returns() == [-1.0, 1.0]
    short = start(0, 15, "quadranto(max_moves=4)")
    for _ in range(4):
        short.apply_action(STAY)
    assert short.is_terminal() and "4 moves" in rules_text(short.get_game())


def test_a_seat_sees_its_cell_and_only_the_opponents_quadrant() -> None:
    a, b = start(5, 10), start(5, 15)  # player 1 on different cells of the same quadrant
    for s in (a, b):
        s.apply_action(STAY)
        s.apply_action(UP)  # player 1 moves: (1,2) or (2,3), both in the right half
    assert a.pos[1] == 6 and b.pos[1] == 11
    # Player 1 is now in the top-right quadrant in a, the bottom-right one in b: that is all player 0 learns.
    assert "opponent is in the top-right quadrant" in a.observation_string(0)
    assert "opponent is in the bottom-right quadrant" in b.observation_string(0)
    c = start(5, 14)
    c.apply_action(STAY)
    c.apply_action(UP)  # (3,2) -> (2,2): bottom-right, like b
    assert c.information_state_string(0) == b.information_state_string(0)
    assert json_view(c, 0) == json_view(b, 0)
    view = json_view(b, 0)
    assert isinstance(view, dict) and view["position"] == [1, 1] and view["opponent_position"] is None
    assert c.information_state_string(1) != b.information_state_string(1)
    view = observation_text(b, 0)
    assert "(row 1, column 1)" in view and "(row 2" not in view


def test_the_referee_hides_placement_and_moves() -> None:
    state = load_game("quadranto").new_initial_state()
    hist = SeatHistory(2)
    # Up stays in the quadrant (like Left and Stay): hidden. Right is the only way into the top-right
    # quadrant, so the quadrant tells it.
    for a in (5, 10, UP, STAY, RIGHT):
        hist.record(state, state.current_player(), a)
        state.apply_action(a)
    assert [h.action for h in hist.items[1]] == [None, 10, None, STAY, RIGHT]
    assert [h.action for h in hist.items[0]] == [5, None, UP, None, RIGHT]
