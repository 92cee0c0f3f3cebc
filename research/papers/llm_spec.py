"""`--llm SPEC` (and `--llm-config FILE`) of `spielbus paper`: the `[llm.model]` section the papers'
tournaments use, and the same endpoint as `spielbus cwm synthesize` takes it.

SPEC is what a tournament file's agents can reach: nothing (the embedded model, started by the run),
an OpenAI-compatible URL, `ollama:URL`, or NAME, an `[llm.NAME]` section of the tournament file
`--llm-config FILE` (the section as written there: backend, base_url, model, options...; its `model`
wins over `--model`).

Limits: a named section is checked by the LLM layer's own schema (agents.llm.LLMConfig) before any
match; the file's other tables are not read.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from referee.config import ConfigError


def _is_url(spec: str) -> bool:
    return spec.startswith(("ollama:", "http://", "https://"))


def named_section(name: str, config: str | None) -> dict[str, Any]:
    """The `[llm.NAME]` section of the tournament file `config`, validated as an LLM config."""
    if not config:
        raise ConfigError(
            f"--llm {name!r}: not a URL (http...) or ollama:URL; a section NAME needs --llm-config FILE"
        )
    try:
        data = tomllib.loads(Path(config).read_text())
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"--llm-config {config}: {exc}") from exc
    sections = data.get("llm", {})
    section = sections.get(name) if isinstance(sections, dict) else None
    if not isinstance(section, dict):
        have = ", ".join(sorted(sections)) if isinstance(sections, dict) and sections else "none"
        raise ConfigError(f"{config}: no [llm.{name}] section (it has: {have})")
    from agents.llm import LLMConfig

    try:
        LLMConfig.model_validate(section)
    except ValidationError as exc:
        raise ConfigError(f"{config}: [llm.{name}]: {exc.errors()[0]['msg']}") from exc
    return dict(section)


def llm_section(spec: str | None, model: str, config: str | None = None) -> dict[str, Any]:
    """`--llm`: none (the embedded model, started by the run), an OpenAI-compatible URL, `ollama:URL`,
    or the NAME of an [llm.NAME] section of `config`."""
    if not spec:
        return {"backend": "openai", "model": model}
    if spec.startswith("ollama:"):
        return {"backend": "ollama", "base_url": spec.removeprefix("ollama:"), "model": model}
    if spec.startswith(("http://", "https://")):
        return {"backend": "openai", "base_url": spec, "model": model}
    section = named_section(spec, config)
    section.setdefault("model", model)
    return section


def synthesis_llm(spec: str | None, config: str | None = None) -> tuple[str, str | None] | None:
    """`--llm` as `spielbus cwm synthesize --llm SPEC [--config FILE]` takes it (None: no --llm)."""
    if not spec:
        return None
    if _is_url(spec):
        return spec, None
    named_section(spec, config)  # a bad name fails here, before any synthesis
    return spec, config


def llm_of(args: Any) -> dict[str, Any]:
    """The `[llm.model]` section of a `spielbus paper` command line (`--llm`, `--llm-config`, `--model`)."""
    return llm_section(args.llm, args.model, getattr(args, "llm_config", None))
