"""The eq. 8 rollout Q-values of `selfplay collect` against exact values on Kuhn poker.

`collect` estimates each legal action's value at a sampled node by rollouts from the node's true
history (the deal included) under the behaviour policy, and reports a 95% normal interval. On
Kuhn the same value is computed exactly by walking the subtree below the history with the
behaviour policy's probabilities (uniform here), so the intervals can be checked: about 95% of
them must hold the exact value. Too few (a biased estimator, a wrong variance, the wrong
player's payoff) or too many (intervals far too wide) both fail.
"""

from __future__ import annotations

from pathlib import Path

import pyspiel

import agents.policy_dataset as ds
from research.coach.collect import collect


def exact_value(state: pyspiel.State, player: int) -> float:
    """`player`'s expected payoff below `state` when every seat plays uniformly at random."""
    if state.is_terminal():
        return float(state.returns()[player])
    if state.is_chance_node():
        return sum(p * exact_value(state.child(a), player) for a, p in state.chance_outcomes())
    legal = state.legal_actions()
    return sum(exact_value(state.child(a), player) for a in legal) / len(legal)


def test_rollout_q_intervals_cover_the_exact_values_about_95_percent(tmp_path: Path) -> None:
    out = tmp_path / "kuhn"
    collect("kuhn_poker", "random", out, nodes=300, rollouts=100, seed=11, sample=0.5, workers=1)
    _, nodes = ds.read_nodes(out)
    game = pyspiel.load_game("kuhn_poker")
    inside = total = 0
    exact_zero_width = 0
    for node in nodes:
        state = game.new_initial_state()
        for a in node.history:
            state.apply_action(a)
        assert state.current_player() == node.player
        for legal, q, (lo, hi) in zip(node.legal, node.q, node.ci, strict=True):
            exact = exact_value(state.child(legal.id), node.player)
            if hi - lo < 1e-12:
                # All rollouts agreed: below this action the payoff is fixed (e.g. a fold, or a call
                # with the cards known), so the estimate must be the exact value itself.
                assert q == exact
                exact_zero_width += 1
                continue
            total += 1
            inside += lo <= exact <= hi
            # Every estimate is near its exact value whatever its interval says (payoffs lie in [-2, 2]).
            assert abs(q - exact) < 1.0
    coverage = inside / total
    # 360 random intervals (and 240 fixed ones): at a true 95% the share lies in [0.92, 0.98] with
    # probability ~0.99 (the normal interval with z, not t, at 100 rollouts covers a little less).
    assert total + exact_zero_width == 600 and total >= 300
    assert 0.90 <= coverage <= 0.985, (
        f"{inside}/{total} = {coverage:.3f} of the 95% intervals hold the exact value"
    )
