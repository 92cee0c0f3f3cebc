"""The LLM layer against the real embedded model (SmolLM2-135M via llama.cpp) and,
for the native Ollama API, against a stand-in server (tests/llm_standins.py)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from agents.llm import LLMClient, LLMConfig, LLMOptions, LLMTimeout, LLMUnavailable, match_choice, metered
from agents.llm.cache import ResponseCache
from agents.llm.server import EmbeddedServer
from bus.process import free_port
from tests.llm_fixtures import llm_config, llm_server
from tests.llm_standins import OllamaStandIn

__all__ = ["llm_server"]

MOVES = ["x(0,0)", "x(1,1)", "x(2,2)"]


# --- parsing -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"action": "x(1,1)"}', "x(1,1)"),
        ("x(2,2)", "x(2,2)"),
        ("  'X(0,0)'. ", "x(0,0)"),
        ("I would play x(2,2) because x(0,0) is taken", "x(2,2)"),
        ("", None),
        ("The centre is the best square.", None),
        ('{"action": "x(9,9)"}', None),
    ],
)
def test_match_choice(text: str, expected: str | None) -> None:
    assert match_choice(text, MOVES) == expected


def test_match_choice_whole_tokens_only() -> None:
    # "a" must not match inside "cat"; the longer of two choices at one position wins.
    assert match_choice("cat", ["a", "b"]) is None
    assert match_choice("play ab now", ["a", "ab"]) == "ab"


def test_config_honours_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", "http://example:1234/v1")
    monkeypatch.setenv("OLLAMA_HOST", "otherhost:11434")
    assert LLMConfig().resolved_base_url() == "http://example:1234/v1"
    assert LLMConfig(backend="ollama").resolved_base_url() == "http://otherhost:11434"
    assert LLMConfig(base_url="http://x/v1").resolved_base_url() == "http://x/v1"
    with pytest.raises(ValueError):
        LLMConfig.model_validate({"backend": "openai", "bogus": 1})


async def test_cache_dedupes_concurrent_identical_calls() -> None:
    cache: ResponseCache[str] = ResponseCache()
    calls = 0

    async def call() -> str:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return "v"

    results = await asyncio.gather(*(cache.get_or_call("k", call) for _ in range(3)))
    assert calls == 1
    assert sorted(hit for _, hit in results) == [False, True, True]
    assert cache.hits == 2 and cache.misses == 1


# --- the real model ------------------------------------------------------------------------


async def test_constrained_choice_with_real_model(llm_server: EmbeddedServer) -> None:
    client = LLMClient(llm_config(llm_server))
    try:
        with metered() as meter:
            result = await client.chat(
                [("system", "You play tic-tac-toe."), ("user", f"Choose one move from {MOVES}.")],
                choices=MOVES,
            )
        assert result.choice in MOVES
        assert json.loads(result.text)["action"] == result.choice
        assert result.calls == 1 and not result.cached
        assert result.prompt_tokens > 0 and result.completion_tokens > 0
        assert meter.llm_calls == 1
        assert meter.prompt_tokens == result.prompt_tokens
        assert meter.completion_tokens == result.completion_tokens
    finally:
        await client.aclose()


async def test_cache_hit_makes_no_server_call(llm_server: EmbeddedServer) -> None:
    client = LLMClient(llm_config(llm_server))
    messages = [("user", "Name a colour.")]
    try:
        with metered() as meter:
            first = await client.chat(messages, max_tokens=8)
            sent = client.requests_sent
            second = await client.chat(messages, max_tokens=8)
        assert client.requests_sent == sent == 1
        assert second.cached and second.texts == first.texts and second.calls == 0
        assert meter.llm_calls == 1 and meter.cache_hits == 1
        # Any change to the request is a different key.
        with metered() as meter2:
            await client.chat(messages, max_tokens=9)
        assert meter2.llm_calls == 1 and meter2.cache_hits == 0
        # Cache off: always a call.
        with metered() as meter3:
            await client.chat(messages, max_tokens=8, use_cache=False)
        assert meter3.llm_calls == 1 and meter3.cache_hits == 0
    finally:
        await client.aclose()


async def test_n_samples_from_a_server_without_n(llm_server: EmbeddedServer) -> None:
    client = LLMClient(llm_config(llm_server))
    try:
        with metered() as meter:
            result = await client.chat(
                [("user", f"Choose one move from {MOVES}.")], choices=MOVES, n=3, temperature=0.7
            )
        assert len(result.texts) == 3 and all(c in MOVES for c in result.choices)
        assert result.calls == 3 and meter.llm_calls == 3
    finally:
        await client.aclose()


async def test_server_down_raises_after_retries() -> None:
    port = free_port()
    config = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", retries=1, timeout_s=2)
    client = LLMClient(config)
    try:
        with metered() as meter, pytest.raises(LLMUnavailable):
            await client.chat([("user", "hi")])
        assert meter.llm_calls == 0 and meter.failures == 2
    finally:
        await client.aclose()


async def test_spent_deadline_sends_nothing() -> None:
    client = LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1"))
    with pytest.raises(LLMTimeout):
        await client.chat([("user", "hi")], deadline=time.monotonic() - 1)
    assert client.requests_sent == 0


def test_llm_serve_main_starts_and_stops() -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "agents.llm.server", "--port", str(port), "--threads", "1"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "ready" in line and str(port) in line
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=5) as resp:
            models = json.load(resp)
        assert models["data"][0]["id"] == "smollm2"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- the native Ollama API, against a stand-in ------------------------------------------


async def test_ollama_backend_against_standin() -> None:
    standin = OllamaStandIn()
    url = await standin.start()
    client = LLMClient(LLMConfig(backend="ollama", base_url=url, model="m", options=LLMOptions(seed=3)))
    try:
        with metered() as meter:
            result = await client.chat([("user", "pick one")], choices=MOVES)
        assert result.choice == MOVES[0]
        body = standin.requests[-1]
        assert body["stream"] is False and body["model"] == "m"
        assert body["format"]["properties"]["action"]["enum"] == MOVES
        assert body["options"]["seed"] == 3 and body["options"]["num_predict"] == 48
        assert result.prompt_tokens == 2 and result.completion_tokens == 2
        assert meter.llm_calls == 1 and meter.prompt_tokens == 2

        # Unconstrained prose naming a move, then two samples (Ollama has no n: two requests).
        standin.replies += ["I think x(2,2) is best", "x(1,1)"]
        result = await client.chat([("user", "free")], choices=MOVES, constrain=False, n=2)
        assert result.choices == ["x(2,2)", "x(1,1)"] and result.calls == 2
        assert "format" not in standin.requests[-1]
        assert standin.requests[-1]["options"]["seed"] == 4  # sample 2 gets seed + 1

        standin.status = 500
        with pytest.raises(LLMUnavailable):
            await client.chat([("user", "fails")])
        standin.status = 200
        # A server that would take a minute: the client gives up at its deadline, before any answer.
        standin.delay_s = 60.0
        answered = standin.answered
        with pytest.raises(LLMTimeout):
            await client.chat([("user", "slow")], deadline=time.monotonic() + 0.5)
        assert standin.answered == answered
    finally:
        await client.aclose()
        await standin.stop()


async def test_ollama_host_env(monkeypatch: pytest.MonkeyPatch) -> None:
    standin = OllamaStandIn()
    url = await standin.start()
    monkeypatch.setenv("OLLAMA_HOST", url.removeprefix("http://"))
    client = LLMClient(LLMConfig(backend="ollama"))
    try:
        result = await client.chat([("user", "hello")])
        assert result.text == "stand-in answer" and len(standin.requests) == 1
    finally:
        await client.aclose()
        await standin.stop()
