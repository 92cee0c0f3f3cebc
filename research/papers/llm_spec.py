"""`--llm SPEC` of `spielbus paper`: the `[llm.model]` section the papers' tournaments use.

Limits: none (the embedded model, started by the run), an OpenAI-compatible URL, or `ollama:URL`.
"""

from __future__ import annotations

from typing import Any

from referee.config import ConfigError


def llm_section(spec: str | None, model: str) -> dict[str, Any]:
    """`--llm`: none (the embedded model, started by the run), an OpenAI-compatible URL, or `ollama:URL`."""
    if not spec:
        return {"backend": "openai", "model": model}
    if spec.startswith("ollama:"):
        return {"backend": "ollama", "base_url": spec.removeprefix("ollama:"), "model": model}
    if spec.startswith(("http://", "https://")):
        return {"backend": "openai", "base_url": spec, "model": model}
    raise ConfigError(f"--llm {spec!r}: give an OpenAI-compatible URL (http...) or ollama:URL")
