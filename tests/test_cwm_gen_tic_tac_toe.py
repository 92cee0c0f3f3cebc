"""Generalized tic-tac-toe (6x6, win length 4; appendix I.4 of "Code World Models for General Game
Playing"): OpenSpiel's `mnk(m=6,n=6,k=4)` follows every rule the appendix names."""

from __future__ import annotations

import pyspiel
import pytest

from games.cwm.gen_tic_tac_toe import SPEC
from games.loader import load_game
from games.rules import rules_text
from games.view import json_view, observation_text

# A full board without four in a row anywhere (found by random play, checked below).
DRAW = [32, 27, 9, 18, 35, 19, 34, 17, 29, 6, 26, 31, 4, 3, 8, 2, 0, 14]
DRAW += [25, 24, 16, 22, 28, 11, 21, 10, 12, 13, 20, 15, 30, 23, 1, 7, 5, 33]


def cell(r: int, c: int) -> int:
    return r * 6 + c


def play(moves: list[int]) -> pyspiel.State:
    state = load_game(SPEC).new_initial_state()
    for a in moves:
        assert not state.is_terminal()
        state.apply_action(a)
    return state


def x_line_with_o_elsewhere(cells: list[int], o_cells: list[int]) -> list[int]:
    """x plays `cells` in order, o answers on `o_cells` (no line of its own)."""
    moves = []
    for x, o in zip(cells, o_cells[: len(cells)], strict=True):
        moves += [x, o]
    return moves[:-1]


def test_setup_6x6_empty_x_first() -> None:
    game = load_game(SPEC)
    assert game.num_players() == 2 and game.num_distinct_actions() == 36
    state = game.new_initial_state()
    assert state.current_player() == 0 and sorted(state.legal_actions()) == list(range(36))
    assert state.action_to_string(0, cell(2, 3)) == "x(2,3)"
    state.apply_action(cell(2, 3))
    assert state.current_player() == 1 and cell(2, 3) not in state.legal_actions()  # occupied
    assert state.action_to_string(1, cell(0, 5)) == "o(0,5)"


@pytest.mark.parametrize(
    "line",
    [
        [cell(2, c) for c in range(1, 5)],  # horizontal
        [cell(r, 4) for r in range(2, 6)],  # vertical
        [cell(i, i + 1) for i in range(4)],  # diagonal
        [cell(i + 2, 5 - i) for i in range(4)],  # anti-diagonal
    ],
)
def test_four_in_a_line_wins_at_once(line: list[int]) -> None:
    others = [a for a in (cell(0, 0), cell(5, 0), cell(0, 3), cell(5, 2), cell(1, 5)) if a not in line]
    moves = x_line_with_o_elsewhere(line, others)
    before = play(moves[:-1])
    assert not before.is_terminal()  # three are not enough
    state = play(moves)
    assert state.is_terminal() and state.returns() == [1.0, -1.0]
    assert state.legal_actions() == []  # the game ends immediately


def test_o_wins_too_and_five_in_a_row_counts() -> None:
    # o completes a line first while x has three.
    o_wins = play(
        [cell(0, 0), cell(3, 0), cell(0, 1), cell(3, 1), cell(0, 2), cell(3, 2), cell(5, 5), cell(3, 3)]
    )
    assert o_wins.returns() == [-1.0, 1.0]
    # x fills the gap of x x . x x: an unbroken line of five contains four.
    state = play(
        [cell(1, 0), cell(4, 0), cell(1, 1), cell(4, 1), cell(1, 3), cell(4, 3), cell(1, 4), cell(5, 5)]
    )
    assert not state.is_terminal()
    state.apply_action(cell(1, 2))
    assert state.returns() == [1.0, -1.0]


def test_broken_line_does_not_win() -> None:
    state = play([cell(0, 0), cell(5, 5), cell(0, 1), cell(5, 4), cell(0, 3), cell(4, 5), cell(0, 4)])
    assert not state.is_terminal()


def test_full_board_without_a_line_is_a_draw() -> None:
    state = play(DRAW[:-1])
    assert not state.is_terminal()
    state.apply_action(DRAW[-1])
    assert state.is_terminal() and state.returns() == [0.0, 0.0]
    view = json_view(state, 0)
    assert isinstance(view, dict) and view["draw"] is True and view["winner"] is None
    assert all("." not in row for row in view["board"])


def test_views_and_rules_text() -> None:
    state = play([cell(1, 2), cell(4, 4)])
    view = json_view(state, 1)
    assert view == {
        "rows": 6,
        "cols": 6,
        "win_length": 4,
        "board": ["......", "..x...", "......", "......", "....o.", "......"],
        "to_move": 0,
        "winner": None,
        "draw": False,
    }
    assert observation_text(state, 0).splitlines()[1] == "..x..."
    text = rules_text(load_game(SPEC))
    assert text.startswith("Generalized Tic-Tac-Toe (6x6, win length 4")
    assert "4 of their marks in an unbroken straight line" in text and "draw" in text
    assert "(5x7, win length 3" in rules_text(load_game("mnk(m=7,n=5,k=3)"))
