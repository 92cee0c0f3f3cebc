"""What a backend receives and returns, and the errors of the LLM layer.

Every reply is classified once (issue 38), into one of `OUTCOMES`:

- `provider`: the endpoint failed, not the model: a connection error, a timeout, HTTP 408, 409,
  429 or 5xx, or a 200 whose body is not a valid completion (HTML, cut-off JSON, no choices).
  Transient: retried with backoff (`LLMUnavailable`, `LLMTimeout`).
- `config`: HTTP 400, 401, 403, 404 or 422 (other 4xx too): a request the endpoint will never
  accept. Never retried (`LLMConfigError`, naming the refused parameter when the body does).
- `filtered`: the provider's content filter (`finish_reason: content_filter`, or a 400 that says
  so) (`LLMFiltered`).
- `truncated`: the answer was cut at the token limit (`finish_reason` / `done_reason: length`)
  (`LLMTruncated` when nothing usable came of it).
- `answered`: a completion.

The first two are the provider's; the last three are the model's (its play, or its fallback).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

Outcome = Literal["answered", "provider", "config", "filtered", "truncated"]
OUTCOMES: tuple[Outcome, ...] = ("answered", "provider", "config", "filtered", "truncated")


class LLMError(Exception):
    """Any failure of the LLM layer; strategies catch this and fall back.

    A plain `LLMError` is the model's failure (nothing usable in what it answered)."""

    outcome: Outcome | Literal["bad_output"] = "bad_output"

    def __init__(self, message: str = "", *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class LLMUnavailable(LLMError):
    """The provider failed: down, overloaded, rate-limited, timed out, or a reply that is not a
    completion. `retry_after_s`: the wait the provider asked for (`Retry-After`, `retry-after-ms`)."""

    outcome = "provider"

    def __init__(self, message: str = "", *, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message, status=status)
        self.retry_after_s = retry_after_s


class LLMTimeout(LLMUnavailable):
    """The server did not answer within the request's time budget (or the budget was spent)."""


class LLMConfigError(LLMError):
    """The endpoint refused the request as such (400/401/403/404/422): retrying cannot help.
    `param`: the request parameter the refusal names, when it names one."""

    outcome = "config"

    def __init__(self, message: str = "", *, status: int | None = None, param: str | None = None) -> None:
        super().__init__(message, status=status)
        self.param = param


class LLMFiltered(LLMError):
    """The provider's content filter withheld the answer."""

    outcome = "filtered"


class LLMTruncated(LLMError):
    """The answer was cut at the token limit before anything usable (raise `max_tokens`, or
    `thinking_tokens` for a reasoning model)."""

    outcome = "truncated"


@dataclass(frozen=True)
class BackendRequest:
    """One HTTP request. `n` is a wish: a backend may return fewer texts (llama.cpp returns one).

    `temperature`, `seed`, `top_p` None: not sent. `think` and `reasoning_effort` go to reasoning
    models (Ollama's `think`; OpenAI's `reasoning_effort`); `token_param` names the field the token
    limit is sent as (`max_completion_tokens` for OpenAI's reasoning models)."""

    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content)
    temperature: float | None
    max_tokens: int
    seed: int | None = None
    top_p: float | None = None
    n: int = 1
    schema: dict[str, Any] | None = None  # constrain the output to this JSON schema
    extra: dict[str, Any] = field(default_factory=dict)
    token_param: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    reasoning_effort: str | None = None
    think: bool | str | None = None

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


@dataclass(frozen=True)
class BackendReply:
    """What a server answered. `texts` are the answers with any thinking removed; `reasoning` the
    thinking of each (empty when none). `usage_known` False: the reply carried no token counts (the
    counts are then the client's estimate, made by `estimated_by`: agents/llm/tokens.py; None: not
    estimated yet). `reasoning_tokens` None: not reported."""

    texts: list[str]
    prompt_tokens: int
    completion_tokens: int
    finish_reasons: tuple[str | None, ...] = ()
    reasoning: tuple[str, ...] = ()
    reasoning_tokens: int | None = None
    total_tokens: int | None = None
    cached_tokens: int = 0
    usage_known: bool = True
    estimated_by: str | None = None

    def charged_completion(self) -> int:
        """Completion tokens to charge: `max(completion, total - prompt)`, since some servers report
        the thinking only in `total_tokens`."""
        if self.total_tokens is None:
            return self.completion_tokens
        return max(self.completion_tokens, self.total_tokens - self.prompt_tokens)


class Backend(Protocol):
    name: str

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        """One call to the server; raise an `LLMError` subclass (classified) on failure."""
        ...

    async def aclose(self) -> None: ...
