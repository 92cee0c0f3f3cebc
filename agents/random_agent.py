"""Baselines that need no game knowledge: `random` (uniform legal action) and `first`
(the first legal action: deterministic, instant; used by benchmarks and tests)."""

from __future__ import annotations

import random

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from bus.protocol import Turn


class RandomStrategy(Strategy):
    kind = "random"

    def __init__(self, options: StrategyOptions) -> None:
        super().__init__(options)
        self._rng = random.Random(options.seed)

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        return Decision(action=self._rng.choice(turn.legal_actions).id)


class FirstLegalStrategy(Strategy):
    kind = "first"

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        return Decision(action=turn.legal_actions[0].id)
