"""Tabular CFVFP (counterfactual value based fictitious play) for small games, vectorised with numpy.

CFVFP is the solver of "LLM Coaching LLM in Self-Play Training" (its eqs. 4-6, after Ju et
al., "Accelerating Nash equilibrium convergence in Monte Carlo settings through
counterfactual value based fictitious play"): at every information set the next policy is
the pure best response `argmax_a Q(I, a)` to the counterfactual Q-values, and the average
policy weights each iteration's policy by the player's own reach probability (eq. 6).

Q is Ju et al.'s cumulative form: the sum over iterations of the counterfactual values under
each iteration's policies. Counterfactual values are linear in the opponents' reach, so the
argmax is the local best response to the opponents' average play (the paper's eq. 4 with
the average profile); one forward and one backward pass per iteration. An independent
implementation (`research.coach.cfvfp_reference`: recursion over OpenSpiel states) produces
identical iterates; tests/test_cfvfp.py checks it.

`mode = "xfp"` reads eqs. 4-5 the other way: each iteration's policy is the full best response
to the opponents' average, computed bottom-up by counterfactual values (the own downstream
play being that best response too), averaged by eq. 6 (Heinrich et al.'s XFP). Reading eq. 4
with the own downstream play averaged as well (a local argmax only) does not converge
(Kuhn 0.042 after 1,000 iterations, Leduc 1.8 after 300), so it is not offered.

`alternating = True` updates one player per pass (as OpenSpiel's CFR does by default);
False updates all players from one pass. Ties in the argmax are split evenly. `q_power` and
`avg_power` weight iteration t's values and policy by t**power (0, the default, is plain
CFVFP). Measured on Leduc (docs/coach.md): the default (cumulative, alternating) is the
fastest of these; every reading stays several times CFR's exploitability at 10,000
iterations, growing with iterations: pure best responses converge more slowly than regret
matching in full-width play.

Limits: what `research.coach.tree.GameTree` supports (small sequential games held whole
in memory). The exploitability of the result is measured with OpenSpiel's own code
(`exploitability()` below), never with ours.
"""

from __future__ import annotations

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from research.coach.tree import GameTree, Level


class CFVFPSolver:
    def __init__(
        self,
        game: pyspiel.Game,
        *,
        alternating: bool = True,
        q_power: float = 0.0,
        avg_power: float = 0.0,
        mode: str = "cumulative",
        tree: GameTree | None = None,
    ) -> None:
        if mode not in ("cumulative", "xfp"):
            raise ValueError(f"mode must be 'cumulative' or 'xfp', not {mode!r}")
        self.game = game
        self.mode = mode
        self.tree = tree or GameTree.build(game)
        self.alternating = alternating
        self.q_power = q_power
        self.avg_power = avg_power
        t = self.tree
        shape = (t.num_infosets, t.max_actions)
        self.uniform = t.mask / t.mask.sum(axis=1, keepdims=True)
        self.current = self.uniform.copy()  # sigma_t: the policy played this iteration
        self.q_sum = np.zeros(shape)
        self.avg_sum = np.zeros(shape)
        self.iteration = 0
        # Per level: where each parent's run of edges starts (edges are stored parent by parent).
        self._runs = []
        for lv in t.levels:
            starts = np.flatnonzero(np.r_[True, lv.parent[1:] != lv.parent[:-1]])
            self._runs.append((starts, lv.parent[starts]))
        self._term_value = np.zeros((t.num_players, t.num_nodes))
        self._term_value[:, t.terminal] = t.utility

    # --- passes -------------------------------------------------------------------------------
    def _edge_probs(self, sigma: np.ndarray, lv: Level) -> np.ndarray:
        flat = sigma.reshape(-1)
        return np.where(lv.decision, flat[np.where(lv.decision, lv.slot, 0)], lv.chance_prob)

    def reach(self, sigma: np.ndarray) -> np.ndarray:
        """(players + 1, nodes): each player's own reach contribution, chance in the last row."""
        t = self.tree
        reach = np.ones((t.num_players + 1, t.num_nodes))
        for lv in t.levels:
            r = reach[:, lv.parent]
            r[lv.actor, np.arange(len(lv.actor))] *= self._edge_probs(sigma, lv)
            reach[:, lv.child] = r
        return reach

    def values(self, sigma: np.ndarray) -> np.ndarray:
        """(players, nodes): expected payoffs when everyone plays `sigma` from each node."""
        v = self._term_value.copy()
        for lv, (starts, parents) in zip(reversed(self.tree.levels), reversed(self._runs), strict=True):
            contrib = v[:, lv.child] * self._edge_probs(sigma, lv)
            v[:, parents] = np.add.reduceat(contrib, starts, axis=1)
        return v

    def counterfactual_q(self, sigma: np.ndarray, reach: np.ndarray, values: np.ndarray) -> np.ndarray:
        """(infosets, max_actions): sum over the set's histories of the others' reach times the value."""
        t = self.tree
        n = t.num_players
        out = np.zeros(t.num_infosets * t.max_actions)
        for lv in t.levels:
            if not lv.decision.any():
                continue
            d = lv.decision
            parent, child, actor, slot = lv.parent[d], lv.child[d], lv.actor[d], lv.slot[d]
            rp = reach[:, parent]
            others = np.ones(len(parent))
            for j in range(n + 1):
                others *= np.where(actor == j, 1.0, rp[j])
            cf = others * values[actor, child]
            out += np.bincount(slot, weights=cf, minlength=out.size)
        return out.reshape(t.num_infosets, t.max_actions)

    @staticmethod
    def _best_response(q: np.ndarray, mask: np.ndarray) -> np.ndarray:
        qm = np.where(mask, q, -np.inf)
        top = qm.max(axis=1, keepdims=True)
        tol = 1e-9 * np.maximum(1.0, np.abs(top))
        ties = mask & (qm >= top - tol)
        return ties / ties.sum(axis=1, keepdims=True)

    def _own_reach(self, reach: np.ndarray) -> np.ndarray:
        t = self.tree
        return reach[t.infoset_player, t.infoset_node]

    # --- iterations ---------------------------------------------------------------------------
    def iterate(self, iterations: int = 1) -> None:
        for _ in range(iterations):
            self._iterate()
            self.iteration += 1

    def best_response(self, sigma: np.ndarray, player: int) -> tuple[np.ndarray, float]:
        """`player`'s best response to the others playing `sigma` (rows of `player` replaced) and
        its value: bottom-up, each information set takes the argmax of its counterfactual values
        with the best response already in place below it (first action on ties).

        Needs every history of an information set at one depth (true of Kuhn, Leduc and our
        Hold'em, where chance acts at fixed points)."""
        t = self.tree
        reach = self.reach(sigma)
        others_reach = np.prod(np.delete(reach, player, axis=0), axis=0)
        br = sigma.copy()
        v = self._term_value[player].copy()
        for lv, (starts, parents) in zip(reversed(t.levels), reversed(self._runs), strict=True):
            mine = lv.decision & (lv.actor == player)
            if mine.any():
                cf = others_reach[lv.parent[mine]] * v[lv.child[mine]]
                q = np.bincount(lv.slot[mine], weights=cf, minlength=br.size).reshape(br.shape)
                rows = np.unique(lv.slot[mine] // t.max_actions)
                best = np.where(t.mask[rows], q[rows], -np.inf).argmax(axis=1)
                br[rows] = 0.0
                br[rows, best] = 1.0
            v[parents] = np.add.reduceat(v[lv.child] * self._edge_probs(br, lv), starts)
        return br, float(v[0])

    def _iterate(self) -> None:
        t = self.tree
        if self.mode == "xfp":
            avg = self.average_array()
            for p in range(t.num_players):
                br, _ = self.best_response(avg, p)
                who = t.infoset_player == p
                self.avg_sum[who] += self._own_reach(self.reach(br))[who, None] * br[who]
            return
        groups = [t.infoset_player == p for p in range(t.num_players)] if self.alternating else [None]
        wq = (self.iteration + 1) ** self.q_power
        wa = (self.iteration + 1) ** self.avg_power
        for who in groups:
            reach = self.reach(self.current)
            q = wq * self.counterfactual_q(self.current, reach, self.values(self.current))
            own = wa * self._own_reach(reach)[:, None]
            if who is None:
                self.avg_sum += own * self.current
                self.q_sum += q
                self.current = self._best_response(self.q_sum, self.tree.mask)
            else:
                self.avg_sum[who] += own[who] * self.current[who]
                self.q_sum[who] += q[who]
                self.current[who] = self._best_response(self.q_sum[who], self.tree.mask[who])

    # --- results ------------------------------------------------------------------------------
    def average_array(self) -> np.ndarray:
        total = self.avg_sum.sum(axis=1, keepdims=True)
        safe = np.where(total > 0, total, 1.0)
        return np.where(total > 0, self.avg_sum / safe, self.uniform)

    def average_policy(self) -> dict[str, dict[int, float]]:
        """Information set string -> {action id: probability}."""
        avg = self.average_array()
        t = self.tree
        return {
            key: {a: float(avg[i, k]) for k, a in enumerate(t.infoset_actions[i])}
            for i, key in enumerate(t.infoset_keys)
        }


def to_tabular_policy(game: pyspiel.Game, table: dict[str, dict[int, float]]) -> policy_lib.TabularPolicy:
    pol = policy_lib.TabularPolicy(game)
    for key, probs in table.items():
        idx = pol.state_lookup.get(key)
        if idx is None:
            continue
        row = np.zeros(pol.action_probability_array.shape[1])
        for a, p in probs.items():
            row[a] = p
        pol.action_probability_array[idx] = row
    return pol


def exploitability(game: pyspiel.Game, table: dict[str, dict[int, float]]) -> float:
    """OpenSpiel's exploitability (NashConv / 2) of a table policy; two-player zero-sum games."""
    from open_spiel.python.algorithms import exploitability as ex

    return float(ex.exploitability(game, to_tabular_policy(game, table)))
