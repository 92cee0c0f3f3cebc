"""Baselines that need no game knowledge: `random` (uniform legal action) and `first`
(the first legal action: deterministic, instant; used by benchmarks and tests)."""

from __future__ import annotations

from agents.base import Decision, MatchContext, Strategy, decision_rng
from bus.protocol import Turn


class RandomStrategy(Strategy):
    kind = "random"

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        return Decision(action=decision_rng(self.options.seed, turn).choice(turn.legal_actions).id)


class FirstLegalStrategy(Strategy):
    kind = "first"

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        return Decision(action=turn.legal_actions[0].id)
