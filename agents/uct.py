"""UCT's selection step, shared by the two tree searches that keep per-action statistics in
dicts: `agents.mcts_agent`'s information-set MCTS over OpenSpiel states and the code world
model harness's (IS)MCTS (`agents.cwm.harness`). Pure Python on purpose: the harness runs in
the sandbox, where only the standard library and this package's pure modules are imported.

Availability counts (`avail`) stand in for the parent's visits, as in information-set MCTS
(an action counts as available each time the node is reached with it legal).
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

A = TypeVar("A", bound=Hashable)


def uct_select(
    legal: Sequence[A],
    visits: Mapping[A, int],
    value: Mapping[A, float],
    avail: Mapping[A, int],
    uct_c: float,
    rng: random.Random,
) -> A:
    """An unvisited legal action at random, else the legal action of highest UCB1 score
    (mean value plus `uct_c * sqrt(ln(avail) / visits)`; the first on ties)."""
    unvisited = [a for a in legal if a not in visits]
    if unvisited:
        return rng.choice(unvisited)
    score = {a: value[a] / visits[a] + uct_c * math.sqrt(math.log(avail[a]) / visits[a]) for a in legal}
    return max(legal, key=score.__getitem__)
