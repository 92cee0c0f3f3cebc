"""The LLM layer: one client interface (`LLMClient`), two backends (openai, ollama),
every reply classified (provider / config / filtered / truncated / answered: `agents.llm.base`),
retries as providers ask, thinking kept apart, a response cache, usage and cost accounting, the
call store, and the embedded llama.cpp server. Users' guide: docs/llm-providers.md."""

from agents.llm.base import (
    LLMConfigError,
    LLMError,
    LLMFiltered,
    LLMTimeout,
    LLMTruncated,
    LLMUnavailable,
)
from agents.llm.client import ChatResult, LLMClient, choice_schema, match_choice
from agents.llm.config import LLMConfig, LLMOptions
from agents.llm.usage import UsageMeter, metered

__all__ = [
    "ChatResult",
    "LLMClient",
    "LLMConfig",
    "LLMConfigError",
    "LLMError",
    "LLMFiltered",
    "LLMOptions",
    "LLMTimeout",
    "LLMTruncated",
    "LLMUnavailable",
    "UsageMeter",
    "choice_schema",
    "match_choice",
    "metered",
]
