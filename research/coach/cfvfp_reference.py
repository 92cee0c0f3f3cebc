"""A second, independent CFVFP: plain recursion over OpenSpiel states, one history at a time.

It exists to check `research.coach.cfvfp.CFVFPSolver` (flat numpy tree, level-by-level passes):
the two share no code beyond OpenSpiel itself, so equal iterates mean the fast solver computes
what the definition says. The definition ("LLM Coaching LLM in Self-Play Training", Xu et al.,
eqs. 4-6, in the cumulative form of Ju et al.'s counterfactual value based fictitious play):

- Q(I, a) accumulates, over iterations t, the counterfactual value of a at I under sigma_t:
  the sum over the histories h of I of (the other players' and chance's reach of h) times
  (the acting player's expected payoff after h.a when everyone then plays sigma_t);
- sigma_{t+1}(I) is the best response argmax_a Q(I, a) (ties split evenly);
- the average policy weights sigma_t(I) by the player's own reach of I under sigma_t.

With `alternating=True` one pass per player updates only that player (the other players'
policies already updated this iteration), as OpenSpiel's CFR does.

Limits: slow (Python recursion, about 50x the vectorised solver), sequential games only; for
tests and benchmarks on Kuhn and a few Leduc iterations, not for use.
"""

from __future__ import annotations

import numpy as np
import pyspiel

TIE_TOLERANCE = 1e-9  # the same relative tolerance as the fast solver: ties split evenly


def best_response(q: np.ndarray) -> np.ndarray:
    top = float(q.max())
    ties = q >= top - TIE_TOLERANCE * max(1.0, abs(top))
    return ties / ties.sum()


class ReferenceCFVFP:
    def __init__(self, game: pyspiel.Game, *, alternating: bool = True) -> None:
        self.game = game
        self.alternating = alternating
        self.n = game.num_players()
        self.q: dict[str, np.ndarray] = {}
        self.avg: dict[str, np.ndarray] = {}
        self.cur: dict[str, np.ndarray] = {}
        self.legal: dict[str, list[int]] = {}
        self.iteration = 0
        self._discover(game.new_initial_state())

    def _discover(self, state: pyspiel.State) -> None:
        if state.is_terminal():
            return
        if state.is_chance_node():
            for a, _ in state.chance_outcomes():
                self._discover(state.child(a))
            return
        key = state.information_state_string()
        if key not in self.legal:
            legal = state.legal_actions()
            self.legal[key] = legal
            self.q[key] = np.zeros(len(legal))
            self.avg[key] = np.zeros(len(legal))
            self.cur[key] = np.full(len(legal), 1.0 / len(legal))
        for a in state.legal_actions():
            self._discover(state.child(a))

    def _walk(
        self,
        state: pyspiel.State,
        reach: list[float],
        update: set[int],
        dq: dict[str, np.ndarray],
        da: dict[str, np.ndarray],
    ) -> np.ndarray:
        """Expected payoffs (all players) under `cur` from `state`; records updates on the way up."""
        if state.is_terminal():
            return np.asarray(state.returns(), dtype=float)
        if state.is_chance_node():
            value = np.zeros(self.n)
            for a, p in state.chance_outcomes():
                r = list(reach)
                r[self.n] *= p  # chance's reach is the last entry
                value += p * self._walk(state.child(a), r, update, dq, da)
            return value
        player = state.current_player()
        key = state.information_state_string()
        policy = self.cur[key]
        children = []
        for k, a in enumerate(self.legal[key]):
            r = list(reach)
            r[player] *= policy[k]
            children.append(self._walk(state.child(a), r, update, dq, da))
        if player in update:
            others = float(np.prod([reach[j] for j in range(self.n + 1) if j != player]))
            dq.setdefault(key, np.zeros(len(policy)))
            dq[key] += others * np.asarray([c[player] for c in children])
            # Own reach is the same at every history of the set (perfect recall): count it once.
            da.setdefault(key, reach[player] * policy)
        return sum(p * c for p, c in zip(policy, children, strict=True))

    def _pass(self, update: set[int]) -> None:
        dq: dict[str, np.ndarray] = {}
        da: dict[str, np.ndarray] = {}
        self._walk(self.game.new_initial_state(), [1.0] * (self.n + 1), update, dq, da)
        for key, own in da.items():
            self.avg[key] += own
        for key, d in dq.items():
            self.q[key] += d
            self.cur[key] = best_response(self.q[key])

    def iterate(self, iterations: int = 1) -> None:
        for _ in range(iterations):
            if self.alternating:
                for p in range(self.n):
                    self._pass({p})
            else:
                self._pass(set(range(self.n)))
            self.iteration += 1

    def average_policy(self) -> dict[str, dict[int, float]]:
        out = {}
        for key, s in self.avg.items():
            total = s.sum()
            probs = s / total if total > 0 else np.full(len(s), 1.0 / len(s))
            out[key] = {a: float(p) for a, p in zip(self.legal[key], probs, strict=True)}
        return out
