"""Hand-written code world models (the reference a synthesized model is measured against in
tests and benchmarks). They are loaded as code into the sandbox, like any generated model."""

from __future__ import annotations

from pathlib import Path

HERE = Path(__file__).parent


def reference_code(game: str) -> str:
    return (HERE / f"{game}.py").read_text()
