"""Move quality on tic-tac-toe: the exact solver's values against an exhaustive search written here
(plain minimax over a 9-character board, no OpenSpiel), the classes and accuracy of Lichess's
thresholds, and the solver's bound."""

from __future__ import annotations

import functools
import math

import pytest

from analysis.exact import ExactJudge, TooLarge
from analysis.match import Judges, analyse_match
from analysis.scale import accuracy, classify
from bus.protocol import GameSpec, MatchRecord, MoveRecord
from games.loader import load_game

LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


def winner(board: str) -> str | None:
    for a, b, c in LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return None


@functools.cache
def value_for_x(board: str) -> int:
    """+1 x wins, -1 o wins, 0 draw, with perfect play from `board` (x moves when the counts are equal)."""
    w = winner(board)
    if w is not None:
        return 1 if w == "x" else -1
    if "." not in board:
        return 0
    mover = "x" if board.count("x") == board.count("o") else "o"
    values = [value_for_x(board[:i] + mover + board[i + 1 :]) for i in range(9) if board[i] == "."]
    return max(values) if mover == "x" else min(values)


def test_every_position_matches_an_exhaustive_search() -> None:
    game = load_game("tic_tac_toe")
    judge = ExactJudge(game)
    seen: set[str] = set()
    stack = [(game.new_initial_state(), "." * 9)]
    while stack:
        state, board = stack.pop()
        if state.is_terminal() or board in seen:
            continue
        seen.add(board)
        mover = "x" if state.current_player() == 0 else "o"
        sign = 1 if mover == "x" else -1
        values = judge.action_values(state)
        for a in state.legal_actions():  # OpenSpiel's action is the cell, row by row
            child = board[:a] + mover + board[a + 1 :]
            assert values[a] == sign * value_for_x(child), (board, a)
            stack.append((state.child(a), child))
    assert len(seen) == 4520  # every non-terminal position of the game


def test_the_bound_sends_a_larger_game_away() -> None:
    with pytest.raises(TooLarge):
        ExactJudge(load_game("tic_tac_toe"), max_positions=1000)
    with pytest.raises(TooLarge):
        ExactJudge(load_game("chess"))  # far longer than the depth bound


def _record(actions: list[int]) -> MatchRecord:
    game = load_game("tic_tac_toe")
    state = game.new_initial_state()
    moves = []
    for i, a in enumerate(actions):
        p = state.current_player()
        moves.append(
            MoveRecord(turn=i + 1, player=p, action=a, text=state.action_to_string(p, a), agent="xo"[p])
        )
        state.apply_action(a)
    return MatchRecord(
        match_id="m1",
        tournament="t",
        game=GameSpec(name="tic_tac_toe"),
        seats=["x", "o"],
        seed=1,
        moves=moves,
    )


def test_a_match_is_scored_move_by_move() -> None:
    # x takes the centre (best: every opening draws); o answers on an edge (1), which loses by force
    # (a blunder: a draw thrown away, winning chances 0 -> -1); x then plays a corner that keeps the win.
    board = "." * 9
    assert value_for_x("....x....") == 0 and value_for_x(".o..x....") == 1
    rows = analyse_match(_record([4, 1, 0]), Judges())
    assert [r.agent for r in rows] == ["x", "o", "x"]
    centre, edge, corner = rows
    assert (centre.cls, centre.loss, centre.accuracy) == ("best", 0.0, 100.0)
    assert edge.value_before == 0.0 and edge.value_played == -1.0 and edge.loss == 1.0
    assert edge.cls == "blunder" and edge.best_action in (0, 2, 6, 8)
    assert value_for_x("xo..x....") == 1 and corner.cls == "best" and corner.value_played == 1.0
    assert all(r.reference.exact and r.reference.name == "exact" for r in rows)
    assert board == "." * 9


def test_classes_and_accuracy_follow_lichess() -> None:
    assert classify(0.0, False) == "best" and classify(0.05, True) == "best"
    assert classify(0.0999, False) == "good"
    assert classify(0.1, False) == "inaccuracy" and classify(0.1999, False) == "inaccuracy"
    assert classify(0.2, False) == "mistake" and classify(0.3, False) == "blunder"
    # A 10-point drop of Win% (0.2 in winning chances), by the formula of lichess.org/page/accuracy.
    assert math.isclose(accuracy(0.2), 103.1668 * math.exp(-0.04354 * 10) - 3.1669)
    assert accuracy(0.0) == 100.0 and accuracy(2.0) == 0.0
