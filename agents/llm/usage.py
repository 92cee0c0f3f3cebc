"""Usage accounting: every LLM call an agent makes lands in its move's `usage`.

A `UsageMeter` is bound to the current decision through a context variable
(`metered()`), so a strategy need not thread it through every helper: the
client adds each call, token count and cache hit to the meter of the decision
that made it. Tasks spawned inside a decision inherit the same meter object.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bus.protocol import Usage


@dataclass
class UsageMeter:
    """One decision's LLM use. `completion_tokens` is what is charged (thinking included, as
    `max(completion, total - prompt)` when a server reports thinking outside it); `reasoning_tokens`
    the part of it reported as thinking; `unknown_usage_calls` the replies without token counts
    (their tokens are estimates, counted all the same). `calls`: one summary per LLM call
    (`agents.llm.calls.CallRecord.summary`), answered or not, for `Decision.calls`."""

    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cache_hits: int = 0
    failures: int = 0  # failed requests (down, HTTP error, timeout)
    bad_outputs: int = 0  # answers a strategy could not use (counted by the strategy)
    reasoning_tokens: int = 0
    reasoning_reported: bool = False  # some reply reported reasoning tokens (else they are unknown)
    unknown_usage_calls: int = 0
    cost_usd: float = 0.0
    priced: bool = False  # some call had a price (else cost_usd is unknown, not 0)
    outcomes: dict[str, int] = field(default_factory=dict)  # calls by class (agents.llm.base.OUTCOMES)
    calls: list[dict[str, Any]] = field(default_factory=list)

    def add_call(self, prompt_tokens: int, completion_tokens: int) -> None:
        self.llm_calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens

    def add_outcome(self, outcome: str, summary: dict[str, Any]) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1
        self.calls.append(summary)

    def model_answered(self) -> bool:
        """Some call of the decision reached the model (answered, truncated or filtered)."""
        return any(self.outcomes.get(k, 0) for k in ("answered", "truncated", "filtered"))

    def usage(self) -> Usage:
        return Usage(
            llm_calls=self.llm_calls,
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            cache_hits=self.cache_hits,
            # Absent (None), not 0, when nothing reported them: a plain model's usage keeps its bytes.
            reasoning_tokens=self.reasoning_tokens if self.reasoning_reported else None,
            cost_usd=self.cost_usd if self.priced else None,
            unknown_usage_calls=self.unknown_usage_calls or None,
        )


_current: contextvars.ContextVar[UsageMeter | None] = contextvars.ContextVar(
    "spielbus_llm_meter", default=None
)


def current_meter() -> UsageMeter | None:
    return _current.get()


@contextlib.contextmanager
def metered(meter: UsageMeter | None = None) -> Iterator[UsageMeter]:
    """Bind a meter (a new one by default) to the calls made inside the block."""
    meter = meter or UsageMeter()
    token = _current.set(meter)
    try:
        yield meter
    finally:
        _current.reset(token)
