"""Tabular CFVFP, checked with OpenSpiel's own exploitability and against OpenSpiel's CFR."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest

from agents.coach.cfvfp import CFVFPSolver, exploitability
from agents.coach.tree import GameTree
from games.loader import load_game

TINY_HOLDEM = "simplified_holdem(ranks=3,suits=2,hole_cards=1,flop=1,turn=0,stack=5)"


def cfr_exploitability(game: pyspiel.Game, iterations: int) -> float:
    solver = pyspiel.CFRSolver(game)
    for _ in range(iterations):
        solver.evaluate_and_update_policy()
    return float(pyspiel.exploitability(game, solver.average_policy()))


def test_kuhn_converges_like_cfr_and_to_the_game_value() -> None:
    game = pyspiel.load_game("kuhn_poker")
    solver = CFVFPSolver(game)
    solver.iterate(100)
    e100 = exploitability(game, solver.average_policy())
    solver.iterate(900)
    e1000 = exploitability(game, solver.average_policy())
    assert e1000 < e100 / 4
    assert e1000 < 2 * cfr_exploitability(game, 1000)
    # Kuhn poker's value for the first player is -1/18.
    value = solver.values(solver.average_array())[0, 0]
    assert value == pytest.approx(-1 / 18, abs=0.005)


def test_policies_are_distributions_over_the_legal_actions() -> None:
    game = pyspiel.load_game("leduc_poker")
    solver = CFVFPSolver(game)
    solver.iterate(20)
    table = solver.average_policy()
    assert len(table) == 936
    state = game.new_initial_state()
    state.apply_action(0)
    state.apply_action(3)
    probs = table[state.information_state_string(0)]
    assert sorted(probs) == state.legal_actions()
    assert sum(probs.values()) == pytest.approx(1.0)
    avg = solver.average_array()
    assert np.all(avg[~solver.tree.mask] == 0) and np.allclose(avg.sum(axis=1), 1.0)


def test_tiny_deck_holdem_exploitability_falls() -> None:
    game = load_game(TINY_HOLDEM)
    solver = CFVFPSolver(game)
    e0 = exploitability(game, solver.average_policy())  # uniform play
    solver.iterate(200)
    e200 = exploitability(game, solver.average_policy())
    assert e200 < e0 / 4, (e0, e200)


def test_simultaneous_games_are_refused() -> None:
    with pytest.raises(ValueError, match="sequential"):
        GameTree.build(pyspiel.load_game("goofspiel(num_cards=3)"))
