"""What every LLM strategy shares: options, the agent's one client, the time budget, fallback.

`LLMStrategy.decide` binds a usage meter to the decision (so every LLM call
lands in the move's `usage`), runs `think` under a hard stop a margin before
`turn.deadline_ms`, and on an LLM failure or a timeout falls back as the options
say: `random` plays a random legal move (noted and counted in `stats`),
`clock` gives no move (the strategy raises; the referee's fault policy decides).

The budget ends at the runtime's per-turn deadline (`ctx.deadline`: from the
turn's arrival or the referee's send time), so time spent queued inside the
agent is already accounted for; without one (direct calls) it counts from now.
"""

from __future__ import annotations

import abc
import asyncio
import contextvars
import random
import time
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, Field

from agents.base import (
    Decision,
    DecisionLimit,
    MatchContext,
    ProviderFailure,
    Strategy,
    StrategyOptions,
    decision_rng,
)
from agents.llm.base import LLMError, LLMTimeout, LLMUnavailable
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig, LLMOptions
from agents.llm.prices import Price
from agents.llm.recording import TimeSpent
from agents.llm.usage import UsageMeter, metered
from bus.protocol import MoveStats, Turn


def _llm_keys() -> str:
    """The keys of `--llm` (an `[llm.NAME]` section), from the models themselves so the help stays true."""

    def names(model: type[BaseModel]) -> str:
        return ", ".join(model.model_fields)

    top = [k for k in LLMConfig.model_fields if k not in ("options", "price")]
    return (
        f"The LLM endpoint (an [llm.NAME] section): {', '.join(top)}; "
        f"options = {{{names(LLMOptions)}}}; price = {{{names(Price)}}} (docs/llm-providers.md)."
    )


class LLMStrategyOptions(StrategyOptions):
    llm: LLMConfig = Field(default_factory=LLMConfig, description=_llm_keys())
    fallback: Literal["random", "clock"] = Field(
        default="random",
        description="When the model fails (no usable answer after retries, cut at the token limit, "
        "filtered): play a random legal move, or give no move and let the referee's clock / fault "
        "policy decide. A provider failure (down, rate-limited, hung) is not the model's: the move "
        "carries it and the referee's [policy] provider decides.",
    )
    margin_ms: int = Field(default=500, ge=0, description="Answer this long before the deadline (plus 10%).")


@dataclass
class Budget:
    """A decision's time budget (time.monotonic() instants).

    `deadline` is when thinking must stop: LLM calls are capped by it and
    searches stop there and answer with what they have. `hard` is later: if
    `think` has not returned by then it is cancelled and the fallback plays.
    """

    deadline: float
    hard: float
    # Every answer `spent` gave, in order (kept with a recording), and, in a replay, the answers to
    # give again (agents/llm/recording.py): a search cut by the clock is cut at the same step.
    log: list[bool] = field(default_factory=list)
    script: list[bool] | None = None

    @classmethod
    def for_turn(cls, limit: DecisionLimit, margin_ms: int) -> Budget:
        """From the decision's limit (`ctx.limit(turn)`: the clock and the runtime's deadline)."""
        total, end = limit.clock_s, limit.end
        now = time.monotonic()
        left = total if end is None else end - now
        usable = max(0.05, min(total - margin_ms / 1000 - 0.1 * total, left - margin_ms / 1000))
        usable = min(usable, max(left, 0.01))
        return cls(deadline=now + 0.85 * usable, hard=now + usable)

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def spent(self, reserve_s: float = 0.0) -> bool:
        i = len(self.log)
        answer = self.script[i] if self.script is not None and i < len(self.script) else None
        if answer is None:
            answer = self.remaining() <= reserve_s
        self.log.append(answer)
        return answer


def provider_failed(reason: LLMError, meter: UsageMeter, own_clock: bool = False) -> bool:
    """Whether a failed decision is the provider's: no call of it reached the model (a cache hit
    counts as reached), and some call failed for the provider's reasons (a call cut by the
    decision's own clock while waiting for the provider counts), or the failure itself is one (an
    outage) without any call. Time spent before anything was sent, or spent by the strategy's own
    work (`own_clock` with no provider call), is the agent's own: its fallback plays."""
    if meter.model_answered() or meter.cache_hits:
        return False
    if meter.outcomes.get("provider", 0):
        return True
    if own_clock:
        return False
    return isinstance(reason, LLMUnavailable) and not isinstance(reason, TimeSpent)


def fallback_cause(reason: LLMError, meter: UsageMeter | None) -> str:
    """Why the model's fallback played: `truncated` (cut at the token limit), `filtered` (content
    filter), `config` (a request the endpoint refused), `time` (the turn's time ran out), else
    `bad_output` (answers with no usable move). Unusable answers of which some were cut count as
    `truncated`."""
    if reason.outcome in ("truncated", "filtered", "config"):
        return str(reason.outcome)
    if meter is not None and meter.outcomes.get("truncated", 0) and not isinstance(reason, LLMUnavailable):
        return "truncated"
    if isinstance(reason, LLMUnavailable):
        return "time"
    return "bad_output"


_DECISION_RNG: contextvars.ContextVar[random.Random | None] = contextvars.ContextVar(
    "spielbus_decision_rng", default=None
)


class NoMove(RuntimeError):
    """Raised with `fallback="clock"`: the agent sends no move."""


class LLMStrategy(Strategy):
    """Base of the LLM strategies: subclasses implement `think`."""

    Options: ClassVar[type[StrategyOptions]] = LLMStrategyOptions
    wants_rules: ClassVar[bool] = True

    def __init__(self, options: StrategyOptions, client: LLMClient | None = None) -> None:
        super().__init__(options)
        assert isinstance(options, LLMStrategyOptions)
        self.opts: LLMStrategyOptions = options
        self.llm = client or LLMClient(options.llm)
        self._idle_rng = random.Random(options.seed)

    @property
    def rng(self) -> random.Random:
        """The RNG of the decision being made: `decision_rng(seed, turn)`, one per decision (held in
        a context variable, so concurrent decisions never share it and a seeded agent replays the
        same way however many matches it serves at once). Outside a decision, a per-agent RNG."""
        return _DECISION_RNG.get() or self._idle_rng

    def order_rng(self, turn: Turn) -> random.Random:
        """The RNG that orders a prompt's legal moves (`agents.llm.prompts.shown_order`): a function
        of the agent's seed (0 without one), the turn's `match_seed` and what the seat knows, never
        unseeded, so a rerun or a `spielbus replay` of the run asks the recorded prompts again
        while other matches list the moves otherwise. Apart from `rng`, whose draws stay as they were."""
        return decision_rng(self.opts.seed or 0, turn)

    def models(self) -> list[str]:
        return [f"{self.opts.llm.backend}:{self.opts.llm.model}"]

    async def close(self) -> None:
        await self.llm.aclose()

    @staticmethod
    def rules(turn: Turn, ctx: MatchContext) -> str | None:
        """The rules text: sent on a seat's first turn (the runtime derives it on the others)."""
        if turn.rules:
            ctx.data["rules"] = turn.rules
        return ctx.data.get("rules")

    @abc.abstractmethod
    async def think(self, turn: Turn, ctx: MatchContext, budget: Budget, meter: UsageMeter) -> Decision:
        """Choose; raise LLMError when the LLM cannot give a usable answer."""

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        token = _DECISION_RNG.set(decision_rng(self.opts.seed, turn))
        try:
            return await self._decide(turn, ctx)
        finally:
            _DECISION_RNG.reset(token)

    async def _decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        budget = Budget.for_turn(ctx.limit(turn), self.opts.margin_ms)
        tape = self.llm.tape
        if tape is not None and tape.replay:
            budget.script = tape.clock(turn.match_id, turn.turn)
        with metered() as meter:
            try:
                decision = await asyncio.wait_for(
                    self.think(turn, ctx, budget, meter), max(0.01, budget.hard - time.monotonic())
                )
            except (LLMError, TimeoutError) as exc:
                own_clock = not isinstance(exc, LLMError)
                reason = exc if isinstance(exc, LLMError) else LLMTimeout("time budget spent while thinking")
                if provider_failed(reason, meter, own_clock):
                    ids = [c["id"] for c in meter.calls if c["outcome"] == "provider"]
                    raise ProviderFailure(f"{type(reason).__name__}: {reason}"[:300], calls=ids) from exc
                decision = self.fall_back(turn, reason, meter)
            finally:
                if tape is not None and not tape.replay:
                    tape.record_clock(turn.match_id, turn.turn, budget.log)
        decision.usage = meter.usage()
        decision.calls = list(meter.calls) or None
        if meter.llm_calls:
            # The LLM layer's own count, apart from `usage`: the referee charges the larger (budget.py).
            self._stat(decision, metered=meter.usage().model_dump())
        if meter.failures:
            self._stat(decision, llm_failures=meter.failures)
        if meter.bad_outputs:
            self._stat(decision, bad_outputs=meter.bad_outputs)
            if decision.stats is not None and decision.stats.pruned_illegal is None:
                decision.stats.pruned_illegal = meter.bad_outputs
        return decision

    def fall_back(self, turn: Turn, reason: LLMError, meter: UsageMeter | None = None) -> Decision:
        """The model's own failure (the provider answered): a random legal move, or none. Counted
        as `fallback` and, by cause, `fallback_<cause>` (`fallback_cause`)."""
        if self.opts.fallback == "clock":
            raise NoMove(f"no move: {reason}") from reason
        action = self.rng.choice(turn.legal_actions).id
        note = f"fallback random move: {type(reason).__name__}: {reason}"[:300]
        decision = Decision(action=action, note=note)
        self._stat(decision, fallback=1, **{f"fallback_{fallback_cause(reason, meter)}": 1})
        return decision

    @staticmethod
    def _stat(decision: Decision, **values: Any) -> None:
        stats = decision.stats or MoveStats()
        for k, v in values.items():
            setattr(stats, k, v)
        decision.stats = stats
