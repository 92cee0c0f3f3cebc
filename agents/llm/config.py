"""LLM configuration: which server, which model, which sampling options.

One `LLMConfig` per agent, read from the tournament file (`[llm.NAME]`) or a
strategy's options. Environment variables are honoured when no base URL is set:
`OPENAI_BASE_URL` for the `openai` backend, `OLLAMA_HOST` for `ollama`.
"""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

DEFAULT_OPENAI_URL = "http://127.0.0.1:8080/v1"
DEFAULT_OLLAMA_URL = "http://127.0.0.1:11434"


class LLMOptions(BaseModel):
    """Sampling options; a request may override any of them."""

    model_config = ConfigDict(extra="forbid")
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(default=48, ge=1, le=32_768)
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    # Backend-specific extras, passed through untouched (openai: request body; ollama: `options`).
    extra: dict[str, Any] = Field(default_factory=dict)


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
        default=30.0, gt=0, le=3600, description="Per HTTP request, further capped by the turn deadline."
    )
    retries: int = Field(
        default=1, ge=0, le=10, description="Extra attempts after a transport error or timeout."
    )
    cache: bool = True
    cache_size: int = Field(default=20_000, ge=0, le=10_000_000)

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
