"""The LLM layer's one outward hook: who hears of each backend request.

The LLM client reports every request here (latency, tokens, cache hit, failure) and knows nothing
of who listens; the agent runtime's metrics install themselves as the listener
(`agents.metrics.install`). With no listener (tests, library use) a report is a no-op.
"""

from __future__ import annotations

import logging
from typing import Protocol

log = logging.getLogger(__name__)


class LLMCallListener(Protocol):
    def llm_call(
        self,
        agent: str | None,
        model: str,
        seconds: float,
        prompt_tokens: int,
        completion_tokens: int,
        cached: bool,
        error: bool,
    ) -> None: ...


_listener: LLMCallListener | None = None


def set_listener(listener: LLMCallListener | None) -> None:
    """Make `listener` hear every LLM call of this process (None: nobody)."""
    global _listener
    _listener = listener


def record_llm_call(
    agent: str | None,
    model: str,
    seconds: float,
    prompt_tokens: int = 0,
    completion_tokens: int = 0,
    cached: bool = False,
    error: bool = False,
) -> None:
    """One LLM backend request completed (or failed, or came from the cache). Cheap, thread-safe,
    never raises. `agent=None` means this process's agent."""
    listener = _listener
    if listener is None:
        return
    try:
        listener.llm_call(agent, model, seconds, prompt_tokens, completion_tokens, cached, error)
    except Exception:
        log.warning("could not record an LLM call", exc_info=True)


def record_llm_cost(agent: str | None, model: str, dollars: float) -> None:
    """Dollars one LLM call cost (from the endpoint's price table); heard by a listener that has an
    `llm_cost(agent, model, dollars)` method (`spielbus_llm_cost_dollars_total`). Never raises."""
    listener = _listener
    hear = getattr(listener, "llm_cost", None)
    if hear is None:
        return
    try:
        hear(agent, model, dollars)
    except Exception:
        log.warning("could not record an LLM call's cost", exc_info=True)
