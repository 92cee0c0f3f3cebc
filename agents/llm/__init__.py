"""The LLM layer: one client interface (`LLMClient`), two backends (openai, ollama),
a response cache, usage accounting, and the embedded llama.cpp server."""

from agents.llm.base import LLMError, LLMTimeout, LLMUnavailable
from agents.llm.client import ChatResult, LLMClient, choice_schema, match_choice
from agents.llm.config import LLMConfig, LLMOptions
from agents.llm.usage import UsageMeter, metered

__all__ = [
    "ChatResult",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMOptions",
    "LLMTimeout",
    "LLMUnavailable",
    "UsageMeter",
    "choice_schema",
    "match_choice",
    "metered",
]
