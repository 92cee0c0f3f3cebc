"""Dominated moves: how much a played action gives up against the CFVFP table, from match records.

`table_values(game, table)` gives, per information set, each legal action's expected payoff to
the acting player when both players follow the table everywhere else: the counterfactual values
of `CFVFPSolver.counterfactual_q` divided by the set's counterfactual reach (the probability
that chance and the other player, playing the table, reach each of its histories), i.e. the
expected payoff given that the set is reached. `move_losses(records, game, values)` replays each
match record (its chance outcomes are in it) and, for every move an agent chose, takes the gap
between the best legal action's value and the played one's.

A move is counted **dominated** when that gap exceeds `margin` chips (default 0.5): against
the table's play the action is worse than another legal action by more than half a chip in
expectation. This is dominance relative to the table (the paper's yardstick), not strict
game-theoretic dominance (worse against every opponent), which a mixed game like Leduc hardly
has; the only always-dominated poker move, folding when checking is free, is not a legal action
in OpenSpiel's Leduc nor in the simplified Hold'em (Fold is legal only when facing a bet). The
mean gap (chips given up per move, margin-free) is reported beside the rate.

Limits: two-player sequential games small enough for `GameTree` (Kuhn, Leduc, the tiny-deck
simplified Hold'em). An information set the table makes unreachable for the others (reach 0)
has no value and its moves are not rated (counted as `unrated`), nor are the moves of a record
from where it stops replaying (an action the game refuses).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pyspiel

from bus.protocol import MatchRecord
from research.coach.cfvfp import CFVFPSolver
from research.coach.tree import GameTree

MARGIN = 0.5  # chips; well above the gaps a 1,000-iteration table leaves between its mixed actions


def table_values(
    game: pyspiel.Game, table: Mapping[str, Mapping[int, float]], tree: GameTree | None = None
) -> dict[str, dict[int, float]]:
    """Information set -> {action: expected payoff to its player}, both players playing `table`
    (uniform where it has no row). Sets the others never reach under the table are left out."""
    solver = CFVFPSolver(game, tree=tree)
    t = solver.tree
    sigma = solver.uniform.copy()
    for i, key in enumerate(t.infoset_keys):
        row = table.get(key)
        if row:
            probs = np.array([float(row.get(a, 0.0)) for a in t.infoset_actions[i]])
            if probs.sum() > 0:
                sigma[i, : len(probs)] = probs / probs.sum()
    reach = solver.reach(sigma)
    q = solver.counterfactual_q(sigma, reach, solver.values(sigma))
    # The same sum with every value 1 is the set's counterfactual reach, the normaliser.
    weight = solver.counterfactual_q(sigma, reach, np.ones((t.num_players, t.num_nodes)))
    out: dict[str, dict[int, float]] = {}
    for i, key in enumerate(t.infoset_keys):
        w = weight[i, 0]
        if w > 0:
            out[key] = {a: float(q[i, k] / w) for k, a in enumerate(t.infoset_actions[i])}
    return out


@dataclass
class Losses:
    """Per agent: chips each rated move gave up against the best action, and unrated moves."""

    gaps: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    unrated: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def summary(self, margin: float = MARGIN) -> dict[str, dict[str, float]]:
        names = set(self.gaps) | set(self.unrated)
        out: dict[str, dict[str, float]] = {}
        for name in sorted(names):
            g = self.gaps.get(name, [])
            out[name] = {
                "rated_moves": len(g),
                "unrated_moves": self.unrated.get(name, 0),
                "dominated_rate": sum(x > margin for x in g) / len(g) if g else float("nan"),
                "mean_loss_vs_best": sum(g) / len(g) if g else float("nan"),
            }
        return out


def move_losses(
    records: Iterable[MatchRecord], game: pyspiel.Game, values: Mapping[str, Mapping[int, float]]
) -> Losses:
    """Replay each record and rate every move an agent chose (chance moves and forced ones are
    not the agent's choice and are skipped)."""
    losses = Losses()
    for rec in records:
        state = game.new_initial_state()
        replays = True
        for m in rec.moves:
            replays = replays and not state.is_terminal() and m.action in state.legal_actions()
            if not replays:  # the record no longer replays: its remaining moves are unrated
                if m.agent is not None and not m.forced:
                    losses.unrated[m.agent] += 1
                continue
            if not state.is_chance_node() and m.agent is not None and not m.forced:
                v = values.get(state.information_state_string(state.current_player()))
                if v is None or m.action not in v:
                    losses.unrated[m.agent] += 1
                else:
                    losses.gaps[m.agent].append(max(v.values()) - v[m.action])
            state.apply_action(m.action)
    return losses
