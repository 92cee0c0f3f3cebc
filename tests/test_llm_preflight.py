"""The pre-flight of a run (agents/llm/preflight.py): one real request per distinct endpoint and
model before any match; a request the endpoint refuses stops `spielbus run` with exit 2 naming the
agent, the endpoint and the refused parameter. Against the OpenAI-compatible stand-in
(tests/llm_standins.py)."""

from __future__ import annotations

from pathlib import Path

from agents.llm.config import LLMConfig
from agents.llm.preflight import preflight
from bus.process import free_port
from tests.llm_standins import OpenAIStandIn, spielbus_run

ROOT = Path(__file__).resolve().parents[1]


async def test_one_request_per_endpoint_and_a_refusal_names_the_parameter() -> None:
    s = OpenAIStandIn()
    url = await s.start()
    s.refuse = {"temperature"}
    try:
        same = LLMConfig(base_url=url, model="o-model")
        other = LLMConfig(base_url=url, model="o-model", options={"omit": ["temperature"]})
        problems = await preflight({"a": same, "b": same, "c": other}, budget_s=10)
    finally:
        await s.stop()
    assert len(s.requests) == 2  # a and b share one endpoint and options: one request
    (p,) = problems
    assert p.fatal and p.agents == ("a", "b") and p.param == "temperature" and url in p.endpoint


async def test_a_down_endpoint_is_a_warning() -> None:
    dead = LLMConfig(base_url=f"http://127.0.0.1:{free_port()}/v1", retries=0)
    (p,) = await preflight({"a": dead}, budget_s=5)
    assert p.outcome == "provider" and not p.fatal


async def test_run_stops_with_exit_2_before_any_match(tmp_path: Path) -> None:
    s = OpenAIStandIn()
    url = await s.start()
    s.refuse = {"seed"}
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        'name = "preflight"\ngames_per_pairing = 1\nseed = 3\ndeadline_ms = 5000\n'
        '[[games]]\nname = "tic_tac_toe"\n'
        '[agents.rnd]\nkind = "random"\n'
        '[llm.hosted]\nmodel = "strict-model"\n'
        f'base_url = "{url}"\noptions = {{ seed = 7 }}\n'
        '[agents.thinker]\nkind = "llm_policy"\nllm = "hosted"\n'
    )
    try:
        code, text = await spielbus_run(cfg, tmp_path / "runs", timeout_s=300)
    finally:
        await s.stop()
    assert code == 2, text[-3000:]
    flat = " ".join(text.split())
    assert "agent thinker" in flat and "strict-model" in flat and "`seed`" in flat
    assert len(s.requests) == 1  # the pre-flight's, and nothing played
    assert not list((tmp_path / "runs").glob("*/matches.jsonl")) or all(
        not p.read_text().strip() for p in (tmp_path / "runs").glob("*/matches.jsonl")
    )
