"""Moves of any other perfect-information game judged by a many-simulation search: an estimate.

OpenSpiel's Python MCTS (UCT, random rollouts, MCTS-Solver; the C++ bot crashes on Python games
such as ours in open_spiel 2.0.2) searches the position before the move with `simulations`
simulations from a seeded generator. An action's value is the mean return of its subtree for the
mover; a value the solver proved (a forced win, loss or draw) is exact. The best action is the most
visited one. The move played, if the search visited it fewer than `MIN_VISITS` times, gets a search
of its own from the position after it, whose most visited reply gives its value (zero-sum: the
mover's value is the negated reply value).

Uncertainty: each value carries a 95% half-width `1.96 * s / sqrt(n)` over its n simulations, with
s the largest standard deviation a return in [min_utility, max_utility] can have (half the range),
so the interval is conservative about the sampling noise; `uncertainty` in a row is the larger of the
best and played values' half-widths. Limits: UCT's values are biased towards the search's own
rollout play, not only noisy, and the interval does not cover that bias: an estimate
(`exact = false`), labelled so. Two-player zero-sum sequential perfect-information games only.
"""

from __future__ import annotations

import math

import numpy as np
import pyspiel
from open_spiel.python.algorithms import mcts

from analysis.exact import TooLarge
from analysis.scale import Reference, winning_chances_range
from analysis.verdict import Verdict, two_player_zero_sum

DEFAULT_SIMULATIONS = 2_000
MIN_VISITS = 30
_Z = 1.96


class EstimateJudge:
    def __init__(self, game: pyspiel.Game, simulations: int = DEFAULT_SIMULATIONS, seed: int = 0) -> None:
        if not two_player_zero_sum(game, perfect=True):
            raise TooLarge(f"{game.get_type().short_name} is not a two-player zero-sum sequential game")
        self.simulations, self.seed = simulations, seed
        self.lo, self.hi = game.min_utility(), game.max_utility()
        self.sd = (self.hi - self.lo) / 2
        self.reference = Reference(
            name="mcts",
            detail=f"OpenSpiel MCTS (UCT c=2, 1 random rollout per leaf, solver), {simulations} simulations",
            exact=False,
            unit="return",
            limits="an estimate: sampling noise (the uncertainty) and the bias of random rollouts",
        )

    def _search(self, game: pyspiel.Game, state: pyspiel.State) -> mcts.SearchNode:
        rng = np.random.RandomState(self.seed)
        bot = mcts.MCTSBot(
            game,
            uct_c=2.0,
            max_simulations=self.simulations,
            evaluator=mcts.RandomRolloutEvaluator(n_rollouts=1, random_state=rng),
            solve=True,
            random_state=rng,
        )
        return bot.mcts_search(state)

    def _value(self, node: mcts.SearchNode) -> tuple[float, float]:
        """A child's value for the player who chose it, and its 95% half-width."""
        if node.outcome is not None:
            return float(node.outcome[node.player]), 0.0
        n = max(node.explore_count, 1)
        return node.total_reward / n, _Z * self.sd / math.sqrt(n)

    def _proven_win(self, node: mcts.SearchNode, mover: int) -> bool:
        return node.outcome is not None and node.outcome[mover] >= self.hi

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        mover = state.current_player()
        root = self._search(game, state)
        # The most visited child, unless the solver proved a win for the mover.
        best_node = max(root.children, key=lambda c: (self._proven_win(c, mover), c.explore_count))
        best, best_hw = self._value(best_node)
        node = next(c for c in root.children if c.action == action)
        if node.outcome is not None or node.explore_count >= MIN_VISITS:
            played, played_hw = self._value(node)
        else:
            after = state.child(action)
            if after.is_terminal():
                played, played_hw = float(after.returns()[mover]), 0.0
            elif after.is_chance_node():  # a reply search would start at chance: keep the few visits
                played, played_hw = self._value(node)
            else:
                reply = self._search(game, after)
                reply_node = max(reply.children, key=lambda c: c.explore_count)
                v, played_hw = self._value(reply_node)
                played = v if reply_node.player == mover else -v
        if played >= best:
            best, best_hw, best_node = played, played_hw, node
        return Verdict(
            value_before=best,
            value_played=played,
            value_best=best,
            best_action=best_node.action,
            wc_played=winning_chances_range(played, self.lo, self.hi),
            wc_best=winning_chances_range(best, self.lo, self.hi),
            uncertainty=max(best_hw, played_hw),
        )
