"""Monte Carlo CFVFP (Ju et al.) next to OpenSpiel's Monte Carlo CFR, on one traversal code.

Ju et al. ("Accelerating Nash equilibrium convergence in Monte Carlo settings through
counterfactual value based fictitious play") run CFVFP on sampled trees: the traversals of
external or outcome sampling MCCFR, with the policy at each information set the pure best
response to the cumulative sampled counterfactual values instead of regret matching on the
cumulative regrets. Cumulative regret of an action is its cumulative counterfactual value minus
a term that is the same for every action (the value of the policy played), so the argmax of the
regrets OpenSpiel's solvers accumulate *is* the argmax of the cumulative counterfactual values.
MC-CFVFP here is therefore OpenSpiel's own `ExternalSamplingSolver` / `OutcomeSamplingSolver`
with one method replaced (`_regret_matching` -> best response, ties split evenly): same sampling,
same value estimates, same averaging (OpenSpiel's "simple" averaging at the opponent's nodes for
external sampling; reach-weighted for outcome sampling), so nodes touched and seconds compare
like for like.

Every solver here counts the nodes its traversals touch (`nodes`: one per state visited,
terminal and chance states included; OpenSpiel's solvers are subclassed only to count).
`table()` turns the average policy into a `{infoset: {action: prob}}` table for
`research.coach.cfvfp.exploitability` (OpenSpiel's exploitability). Limits: two-player
zero-sum games small enough for OpenSpiel's Python exploitability (Kuhn, Leduc); Python speed
(OpenSpiel's Python MCCFR is the baseline, so per-second figures compare like for like).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib
from open_spiel.python.algorithms import external_sampling_mccfr as es
from open_spiel.python.algorithms import outcome_sampling_mccfr as os_mccfr


def best_response(cumulative: np.ndarray, num_legal_actions: int) -> np.ndarray:
    """The pure best response to cumulative values; ties split evenly (as `CFVFPSolver` does)."""
    top = cumulative.max()
    best = cumulative >= top - 1e-12 * max(1.0, abs(float(top)))
    return best.astype(np.float64) / float(best.sum())


class ESMCCFR(es.ExternalSamplingSolver):
    """OpenSpiel's external sampling MCCFR, counting nodes touched."""

    def __init__(self, game: pyspiel.Game) -> None:
        super().__init__(game, es.AverageType.SIMPLE)
        self.nodes = 0

    def _update_regrets(self, state: pyspiel.State, player: int) -> float:
        self.nodes += 1
        return float(super()._update_regrets(state, player))


class OSMCCFR(os_mccfr.OutcomeSamplingSolver):
    """OpenSpiel's outcome sampling MCCFR (exploration 0.6), counting nodes touched."""

    def __init__(self, game: pyspiel.Game) -> None:
        super().__init__(game)
        self.nodes = 0

    def _episode(self, state: pyspiel.State, *args: Any, **kwargs: Any) -> float:
        self.nodes += 1
        return float(super()._episode(state, *args, **kwargs))


class ESCFVFP(ESMCCFR):
    """External sampling MC-CFVFP: best response to cumulative sampled counterfactual values."""

    def _regret_matching(self, regrets: np.ndarray, num_legal_actions: int) -> np.ndarray:
        return best_response(regrets, num_legal_actions)


class OSCFVFP(OSMCCFR):
    """Outcome sampling MC-CFVFP (the sampling policy keeps OpenSpiel's 0.6 uniform exploration)."""

    def _regret_matching(self, regrets: np.ndarray, num_legal_actions: int) -> np.ndarray:
        return best_response(regrets, num_legal_actions)


SOLVERS: dict[str, type[ESMCCFR] | type[OSMCCFR]] = {
    "ES-MCCFVFP": ESCFVFP,
    "OS-MCCFVFP": OSCFVFP,
    "ES-MCCFR": ESMCCFR,
    "OS-MCCFR": OSMCCFR,
}


def table(solver: ESMCCFR | OSMCCFR, tabular: policy_lib.TabularPolicy) -> dict[str, dict[int, float]]:
    """The solver's average policy as a table; information sets it never saw are left out (uniform
    in the tabular policy `research.coach.cfvfp.to_tabular_policy` builds)."""
    out: dict[str, dict[int, float]] = {}
    for key, info in solver._infostates.items():
        idx = tabular.state_lookup[key]
        legal = np.flatnonzero(tabular.legal_actions_mask[idx])
        avg = np.asarray(info[1], dtype=np.float64)
        out[key] = {int(a): float(p) for a, p in zip(legal, avg / avg.sum(), strict=True)}
    return out
