"""Per agent: accuracy, mean loss and blunders per 100 moves, each with a 95% interval.

The figures are means over the agent's scored moves (moves the referee played for it, `forced`,
and the agent's own fallbacks for a failed LLM answer, `fallback`, are left out: they are not its
play; the standings count the fallbacks). Moves of one match are not independent (one bad position
spoils several moves), so the intervals come from a bootstrap over matches: matches are resampled
with replacement (2,000 times, seeded: the same rows give the same intervals) and the 2.5th and
97.5th percentiles of the resampled figure are the interval. With a single match the interval is the
point itself: it says nothing about spread, and `matches` shows it.

Mean loss is on the winning-chances scale (`analysis.scale`), so games and references can share a
row; per game and reference the figures are kept apart by `by_game`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from analysis.scale import CLASSES, STRICT, MoveAnalysis

RESAMPLES = 2_000


class Interval(BaseModel):
    model_config = STRICT
    value: float
    lo: float
    hi: float


class AgentQuality(BaseModel):
    model_config = STRICT
    agent: str
    game: str
    reference: str
    moves: int
    matches: int
    accuracy: Interval
    mean_wc_loss: Interval
    blunders_per_100: Interval
    classes: dict[str, int]


def _interval(per_match: np.ndarray, counts: np.ndarray, rng: np.random.Generator) -> Interval:
    value = float(per_match.sum() / counts.sum())
    if len(counts) < 2:
        return Interval(value=value, lo=value, hi=value)
    idx = rng.integers(0, len(counts), size=(RESAMPLES, len(counts)))
    boot = per_match[idx].sum(axis=1) / counts[idx].sum(axis=1)
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return Interval(value=value, lo=float(lo), hi=float(hi))


def agent_quality(rows: Iterable[MoveAnalysis], seed: int = 0) -> list[AgentQuality]:
    """One entry per (agent, game, reference name), sorted by game then by accuracy, best first."""
    groups: dict[tuple[str, str, str], dict[str, list[MoveAnalysis]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if not (r.forced or r.fallback):
            groups[(r.agent, r.game, r.reference.name)][r.match_id].append(r)
    out = []
    for (agent, game, reference), matches in groups.items():
        rng = np.random.default_rng(seed)
        ms = list(matches.values())
        counts = np.array([len(m) for m in ms], dtype=float)
        acc = np.array([sum(r.accuracy for r in m) for m in ms])
        loss = np.array([sum(r.wc_loss for r in m) for m in ms])
        blunders = np.array([100.0 * sum(r.cls == "blunder" for r in m) for m in ms])
        classes = {c: sum(r.cls == c for m in ms for r in m) for c in CLASSES}
        out.append(
            AgentQuality(
                agent=agent,
                game=game,
                reference=reference,
                moves=int(counts.sum()),
                matches=len(ms),
                accuracy=_interval(acc, counts, rng),
                mean_wc_loss=_interval(loss, counts, rng),
                blunders_per_100=_interval(blunders, counts, rng),
                classes=classes,
            )
        )
    return sorted(out, key=lambda q: (q.game, -q.accuracy.value, q.agent))
