"""Tabular CFVFP, checked with OpenSpiel's own exploitability and against OpenSpiel's CFR."""

from __future__ import annotations

import numpy as np
import pyspiel
import pytest
from open_spiel.python.algorithms import exploitability as os_exploitability

from games.loader import load_game
from research.coach.cfvfp import CFVFPSolver, exploitability, to_tabular_policy
from research.coach.cfvfp_reference import ReferenceCFVFP
from research.coach.tree import GameTree

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


@pytest.mark.parametrize(
    ("name", "iterations", "alternating"),
    [("kuhn_poker", 200, True), ("kuhn_poker", 200, False), ("leduc_poker", 2, True)],
)
def test_fast_solver_equals_the_independent_reference(name: str, iterations: int, alternating: bool) -> None:
    # The reference walks OpenSpiel states one history at a time and shares no code with the
    # numpy solver: equal average policies mean the reach, counterfactual-value and eq. 6
    # averaging passes (chance included) compute what the definition says.
    game = pyspiel.load_game(name)
    fast = CFVFPSolver(game, alternating=alternating)
    ref = ReferenceCFVFP(game, alternating=alternating)
    fast.iterate(iterations)
    ref.iterate(iterations)
    a, b = fast.average_policy(), ref.average_policy()
    assert a.keys() == b.keys()
    worst = max(abs(a[k][act] - b[k][act]) for k in a for act in a[k])
    assert worst < 1e-9, worst


def test_best_response_value_equals_openspiels() -> None:
    game = pyspiel.load_game("kuhn_poker")
    solver = CFVFPSolver(game)
    solver.iterate(5)
    policy = to_tabular_policy(game, solver.average_policy())
    for player in range(2):
        _, value = solver.best_response(solver.average_array(), player)
        expected = os_exploitability.best_response(game, policy, player)["best_response_value"]
        assert value == pytest.approx(expected, abs=1e-12)


def test_xfp_reading_converges_on_kuhn() -> None:
    game = pyspiel.load_game("kuhn_poker")
    solver = CFVFPSolver(game, mode="xfp")
    solver.iterate(300)
    assert exploitability(game, solver.average_policy()) < 0.015
    with pytest.raises(ValueError, match="mode"):
        CFVFPSolver(game, mode="literal")


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
