"""What a backend receives and returns, and the errors of the LLM layer."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class LLMError(Exception):
    """Any failure of the LLM layer; strategies catch this and fall back."""


class LLMUnavailable(LLMError):
    """The server is down, refused the request, or answered with an HTTP error."""


class LLMTimeout(LLMUnavailable):
    """The server did not answer within the request's time budget (or the budget was spent)."""


@dataclass(frozen=True)
class BackendRequest:
    """One HTTP request. `n` is a wish: a backend may return fewer texts (llama.cpp returns one)."""

    model: str
    messages: tuple[tuple[str, str], ...]  # (role, content)
    temperature: float
    max_tokens: int
    seed: int | None = None
    top_p: float | None = None
    n: int = 1
    schema: dict[str, Any] | None = None  # constrain the output to this JSON schema
    extra: dict[str, Any] = field(default_factory=dict)

    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]


@dataclass(frozen=True)
class BackendReply:
    texts: list[str]
    prompt_tokens: int
    completion_tokens: int


class Backend(Protocol):
    name: str

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        """One call to the server; raise LLMUnavailable / LLMTimeout on failure."""
        ...

    async def aclose(self) -> None: ...
