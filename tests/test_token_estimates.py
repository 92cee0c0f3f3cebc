"""Replies without `usage` (issue 38, point 5): their tokens are estimated with the model's tokenizer
where one is at hand (the endpoint's tokenize route, or a configured tokenizer.json), else at about
4 characters a token, and the call record says which (agents/llm/tokens.py).

Against the real embedded SmolLM2 server (llama-cpp-python's, `/extras/tokenize/count`; llama.cpp's
llama-server `/tokenize` in test_llama_server.py) the estimate of a reply equals the server's own
count; against the OpenAI-compatible stand-in, which reports no usage and has no tokenize route,
the character estimate, or a local tokenizer file the test builds."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from agents.llm import LLMClient, LLMConfig, metered
from agents.llm.recording import RECORD_ENV, REPLAY_ENV
from agents.llm.server import EmbeddedServer
from tests.llm_fixtures import check_server_token_estimate, llm_server
from tests.llm_standins import OpenAIStandIn, Scene

__all__ = ["llm_server"]


async def _ask(s: OpenAIStandIn, text: str, **cfg: Any) -> tuple[Any, list[dict[str, Any]]]:
    config = LLMConfig.model_validate({"base_url": s.url, "model": "m", "cache": False, **cfg})
    client = LLMClient(config)
    try:
        with metered() as meter:
            result = await client.chat([("user", text)], deadline=time.monotonic() + 10)
    finally:
        await client.aclose()
    return result, meter.calls


def _word_tokenizer(path: Path) -> Path:
    """A real tokenizer.json (Hugging Face `tokenizers`): one token per whitespace-separated word."""
    tokenizers = pytest.importorskip("tokenizers")
    vocab = {"[UNK]": 0, "b": 1, "one": 2, "two": 3, "three": 4}
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
    tok.save(str(path))
    return path


async def test_without_a_tokenizer_the_estimate_is_by_characters_and_says_so(
    standin: OpenAIStandIn,
) -> None:
    standin.default = Scene(content="b" * 40, usage=False)
    result, calls = await _ask(standin, "x" * 80)
    assert (result.prompt_tokens, result.completion_tokens) == (20, 10)
    assert calls[0]["tokens_estimated"] is True and calls[0]["tokens_estimated_by"] == "chars"


async def test_a_configured_tokenizer_counts_a_reply_without_usage(
    standin: OpenAIStandIn, tmp_path: Path
) -> None:
    path = _word_tokenizer(tmp_path / "tokenizer.json")
    standin.default = Scene(content="b b b b b b b b b b b b", usage=False)  # 12 words, 23 characters
    result, calls = await _ask(standin, "one two three", tokenizer=str(path))
    assert (result.prompt_tokens, result.completion_tokens) == (3, 12)
    assert calls[0]["tokens_estimated"] is True and calls[0]["tokens_estimated_by"] == "tokenizer"


async def test_a_reply_with_usage_is_not_estimated(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="b")
    _, calls = await _ask(standin, "hi")
    assert calls[0]["tokens_estimated"] is False and calls[0]["tokens_estimated_by"] is None


async def test_an_estimate_is_recorded_and_replayed_without_the_endpoint(
    standin: OpenAIStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _word_tokenizer(tmp_path / "tokenizer.json")
    tape = tmp_path / "llm"
    standin.default = Scene(content="b b b", usage=False)
    monkeypatch.setenv(RECORD_ENV, str(tape))
    first, _ = await _ask(standin, "one two", tokenizer=str(path))
    monkeypatch.delenv(RECORD_ENV)
    monkeypatch.setenv(REPLAY_ENV, str(tape))
    # Replayed with no tokenizer configured: the recorded estimate stands.
    again, calls = await _ask(standin, "one two")
    assert (again.prompt_tokens, again.completion_tokens) == (first.prompt_tokens, first.completion_tokens)
    assert calls[0]["tokens_estimated_by"] == "tokenizer"


def test_a_bad_tokenizer_setting_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="is not a file"):
        LLMConfig(tokenizer=str(tmp_path / "missing.json"))
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json", encoding="utf-8")
    pytest.importorskip("tokenizers")
    with pytest.raises(ValidationError, match=r"is not a tokenizer\.json"):
        LLMConfig(tokenizer=str(bad))


async def test_the_servers_tokenizer_gives_its_own_count_llama_cpp_python(
    llm_server: EmbeddedServer,
) -> None:
    await check_server_token_estimate(llm_server)
