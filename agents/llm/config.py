"""LLM configuration: which server, which model, which sampling options.

One `LLMConfig` per agent, read from the tournament file (`[llm.NAME]`) or a
strategy's options. Environment variables are honoured when no base URL is set:
`OPENAI_BASE_URL` for the `openai` backend, `OLLAMA_HOST` for `ollama`.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.llm.prices import Price, price_for
from agents.llm.tokens import load_tokenizer

DEFAULT_OPENAI_URL = "http://127.0.0.1:8080/v1"
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"


# Reasoning models think before they answer: without this room they are cut at `max_tokens`.
DEFAULT_THINKING_TOKENS = 4096


class LLMOptions(BaseModel):
    """Sampling options; a request may override any of them.

    For reasoning models: `omit` the sampling fields they refuse (OpenAI's o-series and GPT-5
    refuse `temperature` and `top_p`), send the limit as `max_completion_tokens` (`token_param`),
    set `reasoning_effort` (OpenAI-compatible) or `think` (Ollama), and give them room to think:
    `thinking_tokens` is added to every request's `max_tokens` (an answer budget: a strategy's
    48 or 24 tokens for a move). It defaults to 0, or to `DEFAULT_THINKING_TOKENS` when
    `reasoning_effort` or `think` is set.
    """

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0, allow_inf_nan=False)
    max_tokens: int = Field(
        default=48, ge=1, le=32_768, description="Tokens for the answer (thinking apart)."
    )
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0, allow_inf_nan=False)
    omit: list[Literal["temperature", "top_p", "seed"]] = Field(
        default_factory=list, description="Sampling fields never sent (reasoning models refuse them)."
    )
    token_param: Literal["max_tokens", "max_completion_tokens"] = Field(
        default="max_tokens", description="The request field the token limit goes in (openai backend)."
    )
    thinking_tokens: int | None = Field(
        default=None,
        ge=0,
        le=131_072,
        description="Added to max_tokens for thinking; None: 0, or 4096 for reasoning.",
    )
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = Field(
        default=None, description="openai backend: sent as `reasoning_effort`."
    )
    think: bool | Literal["low", "medium", "high"] | None = Field(
        default=None, description="ollama backend: Ollama's `think` (None: not sent)."
    )
    # Backend-specific extras, passed through untouched (openai: request body; ollama: `options`).
    extra: dict[str, Any] = Field(default_factory=dict)

    def thinking_room(self) -> int:
        if self.thinking_tokens is not None:
            return self.thinking_tokens
        reasoning = self.reasoning_effort not in (None, "none") or self.think not in (None, False)
        return DEFAULT_THINKING_TOKENS if reasoning else 0


class LLMConfig(BaseModel):
    """Where and how an agent calls its language model.

    `structured` chooses how a constraint to a set of choices reaches an
    OpenAI-compatible server: `json_object_schema` is llama-cpp-python's
    `{"type": "json_object", "schema": …}` (it rejects the OpenAI form),
    `json_schema` is OpenAI's / vLLM's `{"type": "json_schema", …}`, `off` sends
    none (outputs are still validated against the choices). Ollama always uses
    its native `format` field.
    """

    model_config = ConfigDict(extra="forbid")
    backend: Literal["openai", "ollama"] = "openai"
    base_url: str | None = Field(
        default=None,
        pattern=r"^https?://[^\s/?#]+",
        max_length=2048,
        description="http:// or https:// only; None: from the environment, else the default.",
    )
    model: str = "smollm2"
    api_key: str | None = Field(default=None, description="openai backend; None: OPENAI_API_KEY or a dummy.")
    options: LLMOptions = Field(default_factory=LLMOptions)
    structured: Literal["json_object_schema", "json_schema", "off"] = "json_object_schema"
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        le=3600,
        allow_inf_nan=False,
        description="Per HTTP request, further capped by the turn deadline.",
    )
    retries: int = Field(
        default=4,
        ge=0,
        le=10,
        description="Extra attempts after a provider error (never after a config error).",
    )
    backoff_s: float = Field(
        default=0.5,
        gt=0,
        le=600,
        allow_inf_nan=False,
        description="First retry's wait; doubles each retry (jitter).",
    )
    backoff_max_s: float = Field(
        default=8.0, gt=0, le=3600, allow_inf_nan=False, description="Longest backoff wait."
    )
    price: Price | None = Field(default=None, description="Dollars per million tokens; None: cost unknown.")
    price_file: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="A TOML file of prices per model (agents/llm/prices.py): this model's entry.",
    )
    # Shared by every agent of a run naming this endpoint, across processes (agents/llm/limits.py).
    max_in_flight: int | None = Field(
        default=None, ge=1, le=10_000, description="Requests in flight at once, shared."
    )
    requests_per_minute: float | None = Field(
        default=None,
        gt=0,
        le=1_000_000,
        allow_inf_nan=False,
        description="Requests per minute, spaced evenly, shared.",
    )
    tokens_per_minute: int | None = Field(
        default=None, ge=1, le=10**10, description="Tokens per minute, shared."
    )
    tokenizer: str = Field(
        default="auto",
        min_length=1,
        max_length=4096,
        description="Counts replies without usage: auto (the endpoint's tokenize route, else "
        "characters), chars (4 characters a token), or a tokenizer.json path.",
    )
    cache: bool = True
    cache_size: int = Field(default=20_000, ge=0, le=10_000_000)

    @model_validator(mode="after")
    def _price_from_file(self) -> LLMConfig:
        if self.price_file is not None:
            if self.price is not None:
                raise ValueError("set price or price_file, not both")
            self.price = price_for(self.price_file, self.model)
        return self

    @model_validator(mode="after")
    def _tokenizer_loads(self) -> LLMConfig:
        if self.tokenizer not in ("auto", "chars"):
            load_tokenizer(self.tokenizer)  # a bad file is a configuration error, named here
        return self

    @model_validator(mode="after")
    def _ordered_backoff(self) -> LLMConfig:
        if self.backoff_max_s < self.backoff_s:
            raise ValueError(f"backoff_max_s ({self.backoff_max_s}) is below backoff_s ({self.backoff_s})")
        return self

    def resolved_base_url(self) -> str:
        if self.base_url:
            return self.base_url
        if self.backend == "openai":
            return os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_URL
        host = os.environ.get("OLLAMA_HOST") or DEFAULT_OLLAMA_URL
        # OLLAMA_HOST is often given bare ("0.0.0.0:11434"), as the ollama CLI accepts it.
        return host if "://" in host else f"http://{host}"

    def resolved_api_key(self) -> str:
        return self.api_key or os.environ.get("OPENAI_API_KEY") or "sk-no-key"

    def label(self) -> str:
        """Model name for provenance: backend/model@url."""
        return f"{self.backend}/{self.model}@{self.resolved_base_url()}"
