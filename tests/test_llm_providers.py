"""The LLM layer against providers as they are (issue 38): every reply classified, retries as
providers ask, thinking split from the answer, tokens counted and priced, provider failures raised
as `ProviderFailure`. Against `OpenAIStandIn` / `OllamaStandIn` (tests/llm_standins.py: stand-ins
for hosted APIs and Ollama, which cannot run here), speaking the real wire formats."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from agents.base import MatchContext, ProviderFailure
from agents.llm.base import (
    LLMConfigError,
    LLMFiltered,
    LLMTimeout,
    LLMTruncated,
    LLMUnavailable,
)
from agents.llm.calls import CallRecord
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig
from agents.llm.reasoning import split_thinking
from agents.llm.recording import Tape, TimeSpent
from agents.llm.retry import refused_param, retry_after, status_outcome
from agents.llm.strategy import provider_failed
from agents.llm.usage import UsageMeter, metered
from agents.llm_policy import LLMPolicyOptions, LLMPolicyStrategy
from agents.metrics import AgentMetrics, install
from bus.protocol import GameSpec, LLMCall, Turn
from games.loader import load_game, replay
from referee.turns import TurnFrame, build_turn
from tests.llm_standins import OllamaStandIn, OpenAIStandIn, Scene

HTML = "<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
CALL_KEYS = set(CallRecord(id="x", outcome="answered").summary())


def client(s: OpenAIStandIn, **cfg: Any) -> LLMClient:
    base: dict[str, Any] = {
        "base_url": s.url,
        "model": "m",
        "cache": False,
        "backoff_s": 0.05,
        "timeout_s": 5.0,
    }
    return LLMClient(LLMConfig.model_validate({**base, **cfg}))


async def ask(c: LLMClient, text: str = "hi", deadline_s: float = 10.0, **kw: Any) -> Any:
    try:
        return await c.chat([("user", text)], deadline=time.monotonic() + deadline_s, **kw)
    finally:
        await c.aclose()


def ttt_turn(deadline_ms: int = 20_000) -> Turn:
    state = replay(load_game("tic_tac_toe"), [4])
    frame = TurnFrame("m", GameSpec(name="tic_tac_toe"), ["a", "b"], deadline_ms)
    return build_turn(frame, state, 1, 1, None)


def policy(s: OpenAIStandIn, **llm: Any) -> LLMPolicyStrategy:
    cfg = {"base_url": s.url, "model": "m", "cache": False, "backoff_s": 0.05, "timeout_s": 5.0, **llm}
    return LLMPolicyStrategy(LLMPolicyOptions.model_validate({"seed": 1, "llm": cfg}))


# --- provider errors: retried as the provider asks -------------------------------------------


async def test_429_retry_after_is_waited_for(standin: OpenAIStandIn) -> None:
    standin.script = [Scene("status", status=429, body="{}", headers={"Retry-After": "1"})]
    with metered() as meter:
        result = await ask(client(standin))
    assert result.text and len(standin.requests) == 2
    (call,) = meter.calls
    assert call["outcome"] == "answered" and call["attempts"] == 2 and call["waited_s"] == 1.0
    assert standin.times[1] - standin.times[0] >= 1.0  # it waited before asking again


async def test_retry_after_ms_is_preferred(standin: OpenAIStandIn) -> None:
    headers = {"retry-after-ms": "150", "Retry-After": "30"}
    standin.script = [Scene("status", status=429, body="{}", headers=headers)]
    with metered() as meter:
        await ask(client(standin))
    assert meter.calls[0]["waited_s"] == 0.15 and len(standin.requests) == 2


async def test_retry_after_beyond_the_turn_gives_up_at_once(standin: OpenAIStandIn) -> None:
    standin.default = Scene("status", status=429, body="{}", headers={"Retry-After": "20"})
    with metered() as meter, pytest.raises(LLMUnavailable):
        await ask(client(standin), deadline_s=3.0)
    assert len(standin.requests) == 1  # one request, not sixteen
    (call,) = meter.calls
    assert (call["outcome"], call["status"], call["attempts"]) == ("provider", 429, 1)


async def test_429_without_retry_after_backs_off(standin: OpenAIStandIn) -> None:
    standin.script = [Scene("status", status=429, body="{}")] * 2
    with metered() as meter:
        await ask(client(standin, backoff_s=0.2))
    call = meter.calls[0]
    assert call["attempts"] == 3 and call["waited_s"] > 0
    assert len(standin.requests) == 3


async def test_a_real_limiter_answers_every_concurrent_turn(standin: OpenAIStandIn) -> None:
    standin.min_interval_s = 1.0
    c = client(standin, retries=8)
    try:
        with metered() as meter:
            results = await asyncio.gather(
                *(c.chat([("user", f"turn {i}")], deadline=time.monotonic() + 20) for i in range(4))
            )
    finally:
        await c.aclose()
    assert all(r.text for r in results)
    assert sorted(c["outcome"] for c in meter.calls) == ["answered"] * 4


@pytest.mark.parametrize(
    "scene",
    [
        Scene("status", status=500, body=HTML, content_type="text/html"),
        Scene("status", status=502, body=HTML, content_type="text/html"),
        Scene("status", status=503, body='{"error": {"message": "Loading model"}}'),
        Scene("raw", body=HTML, content_type="text/html"),
        Scene("raw", body='{"id": "x", "choices": [{"message": {"content": "ab'),
        Scene(choices=0),
    ],
    ids=["500-html", "502-html", "503-loading", "200-html", "200-cut-json", "200-no-choices"],
)
async def test_provider_failures_are_retried(standin: OpenAIStandIn, scene: Scene) -> None:
    standin.script = [scene]
    with metered() as meter:
        result = await ask(client(standin))
    assert result.text == "stand-in answer"
    call = meter.calls[0]
    assert (call["outcome"], call["attempts"], call["status"]) == ("answered", 2, 200)


@pytest.mark.parametrize(
    "scene",
    [
        Scene("raw", body=HTML, content_type="text/html"),
        Scene("raw", body='{"choices": [{"mess'),
        Scene(choices=0),
    ],
    ids=["200-html", "200-cut-json", "200-no-choices"],
)
async def test_a_200_that_is_not_a_completion_is_a_provider_error(
    standin: OpenAIStandIn, scene: Scene
) -> None:
    standin.default = scene
    with metered() as meter, pytest.raises(LLMUnavailable) as err:
        await ask(client(standin, retries=0))
    assert err.value.status == 200
    assert meter.calls[0]["outcome"] == "provider"


async def test_a_hang_times_out_as_a_provider_error(standin: OpenAIStandIn) -> None:
    standin.default = Scene("hang")
    with metered() as meter, pytest.raises(LLMTimeout):
        await ask(client(standin, timeout_s=0.5, retries=0))
    assert meter.calls[0]["outcome"] == "provider"


# --- config errors: never retried ------------------------------------------------------------


@pytest.mark.parametrize("param", ["response_format", "seed", "max_tokens", "temperature"])
async def test_a_refused_parameter_is_a_config_error_never_retried(
    standin: OpenAIStandIn, param: str
) -> None:
    standin.refuse = {param}
    c = client(standin, options={"seed": 3})
    with metered() as meter, pytest.raises(LLMConfigError) as err:
        await ask(c, choices=["a", "b"])
    assert err.value.param == param and err.value.status == 400
    assert len(standin.requests) == 1
    assert meter.calls[0]["outcome"] == "config"


async def test_a_400_naming_n_switches_to_one_choice_per_request(standin: OpenAIStandIn) -> None:
    standin.refuse = {"n"}
    result = await ask(client(standin), n=3, temperature=0.7)
    assert len(result.texts) == 3
    assert "n" in standin.requests[0] and all("n" not in r for r in standin.requests[1:])
    assert len(standin.requests) == 4  # the refused one, then one per choice


async def test_options_for_reasoning_models(standin: OpenAIStandIn) -> None:
    options = {
        "omit": ["temperature", "seed", "top_p"],
        "seed": 5,
        "top_p": 0.5,
        "token_param": "max_completion_tokens",
        "reasoning_effort": "low",
    }
    await ask(client(standin, options=options))
    (body,) = standin.requests
    assert not {"temperature", "seed", "top_p", "max_tokens"} & set(body)
    assert body["max_completion_tokens"] == 48 + 4096  # the answer's 48, and room to think
    assert body["reasoning_effort"] == "low"


# --- the model's own outcomes: filtered, truncated -------------------------------------------


async def test_content_filter_200_is_filtered_not_retried(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="", finish_reason="content_filter")
    with metered() as meter, pytest.raises(LLMFiltered):
        await ask(client(standin), choices=["a", "b"])
    assert len(standin.requests) == 1 and meter.calls[0]["outcome"] == "filtered"


async def test_content_filter_400_is_filtered_not_retried(standin: OpenAIStandIn) -> None:
    message = (
        "The response was filtered due to the prompt triggering Azure OpenAI's content management policy."
    )
    body = json.dumps({"error": {"message": message, "code": "content_filter"}})
    standin.default = Scene("status", status=400, body=body)
    with metered() as meter, pytest.raises(LLMFiltered):
        await ask(client(standin))
    assert len(standin.requests) == 1 and meter.calls[0]["outcome"] == "filtered"


async def test_truncated_without_reasoning_keeps_the_text(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="I will play b because", finish_reason="length")
    with metered() as meter:
        result = await ask(client(standin), choices=["a", "b"], constrain=False)
    assert result.choice == "b" and result.truncated
    assert meter.calls[0]["outcome"] == "truncated" and meter.calls[0]["finish_reason"] == "length"


async def test_truncated_while_thinking_is_truncated(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="<think>Let me consider a, then maybe", finish_reason="length")
    with metered() as meter, pytest.raises(LLMTruncated):
        await ask(client(standin), choices=["a", "b"], constrain=False)
    assert meter.calls[0]["reasoning"].startswith("Let me consider a")


async def test_a_truncated_answer_falls_back_counted_apart(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="The centre is taken so I think that", finish_reason="length")
    strat = policy(standin)
    try:
        decision = await strat.decide(ttt_turn(), MatchContext("m"))
    finally:
        await strat.close()
    stats = decision.stats.model_dump() if decision.stats else {}
    assert stats.get("fallback") == 1 and stats.get("fallback_truncated") == 1
    assert "fallback_bad_output" not in stats


# --- reasoning models ------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
async def test_reasoning_field_is_kept_apart_with_folded_tokens(standin: OpenAIStandIn, field: str) -> None:
    standin.default = Scene(
        content='{"action": "b"}', reasoning="a is weak; b wins", reasoning_field=field, reasoning_tokens=600
    )
    with metered() as meter:
        result = await ask(client(standin), choices=["a", "b"])
    assert result.choice == "b" and result.reasoning == ["a is weak; b wins"]
    call = meter.calls[0]
    assert call["reasoning"] == "a is weak; b wins" and call["reasoning_tokens"] == 600
    assert call["completion_tokens"] == 2 + 600 and meter.reasoning_tokens == 600  # the answer's 2 words


async def test_reasoning_tokens_outside_completion_are_charged(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="b", reasoning="hmm", reasoning_tokens=6000, fold="total")
    with metered() as meter:
        result = await ask(client(standin))
    # completion_tokens said 1; total - prompt says 6001: the larger is charged.
    assert result.completion_tokens == 6001 and meter.completion_tokens == 6001


@pytest.mark.parametrize(
    "content",
    [
        '<think>I could play {"action": "a"} here... no.</think>{"action": "b"}',
        "<think>a looks good. Answer: a</think>\nAnswer: b",
        'Thinking: the move a is tempting.</think>{"action": "b"}',
        '{"action": "a"} on reflection, the final answer: {"action": "b"}',
    ],
    ids=["closed-json", "closed-text", "template-opened", "last-json-wins"],
)
async def test_the_answer_after_the_thinking_is_played(standin: OpenAIStandIn, content: str) -> None:
    standin.default = Scene(content=content)
    with metered() as meter:
        result = await ask(client(standin), choices=["a", "b"], constrain=False)
    assert result.choice == "b"
    assert "a" in meter.calls[0]["reasoning"] or "last" in content or content.startswith('{"action": "a"}')


async def test_a_think_draft_naming_another_move_is_not_played(standin: OpenAIStandIn) -> None:
    strat = policy(standin)
    turn = ttt_turn()
    texts = [a.text for a in turn.legal_actions]
    draft, answer = texts[0], texts[-1]
    standin.default = Scene(
        content=f'<think>{{"action": "{draft}"}} is my draft</think>{{"action": "{answer}"}}'
    )
    try:
        decisions = [await strat.decide(turn, MatchContext(f"m{i}")) for i in range(3)]
    finally:
        await strat.close()
    by_text = {a.text: a.id for a in turn.legal_actions}
    assert [d.action for d in decisions] == [by_text[answer]] * 3


async def test_missing_usage_is_unknown_and_estimated(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="b" * 40, usage=False)
    with metered() as meter:
        result = await ask(client(standin), text="x" * 80)
    assert result.prompt_tokens == 20 and result.completion_tokens == 10  # ~4 characters a token
    assert meter.unknown_usage_calls == 1 and meter.calls[0]["tokens_estimated"] is True


# --- cost ------------------------------------------------------------------------------------


async def test_price_table_gives_cost_and_failures_cost_nothing(standin: OpenAIStandIn) -> None:
    standin.script = [Scene("status", status=503, body="{}")]
    standin.default = Scene(content="b", reasoning="r", reasoning_tokens=1000)
    price = {"input_per_mtok": 2.0, "output_per_mtok": 10.0, "reasoning_per_mtok": 20.0}
    with metered() as meter:
        result = await ask(client(standin, price=price), text="one two three")
    prompt = result.prompt_tokens
    expected = (prompt * 2.0 + 1 * 10.0 + 1000 * 20.0) / 1e6
    assert meter.calls[0]["cost_usd"] == pytest.approx(expected) and meter.cost_usd == pytest.approx(expected)


async def test_cost_reaches_prometheus(standin: OpenAIStandIn) -> None:
    standin.default = Scene(content="b")
    metrics = AgentMetrics("priced", ["m"])
    install(metrics)
    try:
        result = await ask(client(standin, price={"input_per_mtok": 1e6, "output_per_mtok": 2e6}))
    finally:
        install(None)
    expected = result.prompt_tokens * 1.0 + result.completion_tokens * 2.0
    got = metrics.registry.get_sample_value(
        "spielbus_llm_cost_dollars_total", {"agent": "priced", "model": "m"}
    )
    assert expected > 0 and got == pytest.approx(expected)


def test_price_table_is_checked() -> None:
    with pytest.raises(ValueError):
        LLMConfig.model_validate({"price": {"input_per_mtok": -1, "output_per_mtok": 1}})
    with pytest.raises(ValueError):
        LLMConfig.model_validate({"price": {"input_per_mtok": float("nan"), "output_per_mtok": 1}})
    with pytest.raises(ValueError):
        LLMConfig.model_validate({"price": {"input_per_mtok": "2", "output_per_mtok": 1}})


# --- decisions: provider failures raised, calls summarised -----------------------------------


async def test_an_outage_raises_provider_failure_not_a_random_move(standin: OpenAIStandIn) -> None:
    standin.default = Scene("status", status=503, body="{}")
    strat = policy(standin, retries=1)
    try:
        with pytest.raises(ProviderFailure) as err:
            await strat.decide(ttt_turn(), MatchContext("m"))
    finally:
        await strat.close()
    assert err.value.calls and all(isinstance(i, str) for i in err.value.calls)
    assert "503" in err.value.cause


async def test_a_decision_lists_its_calls(standin: OpenAIStandIn) -> None:
    standin.default = Scene(reasoning="thinking it over", reasoning_tokens=12)
    strat = policy(standin)
    try:
        decision = await strat.decide(ttt_turn(), MatchContext("m"))
    finally:
        await strat.close()
    (call,) = decision.calls or []
    assert set(call) == CALL_KEYS == {
        "id", "outcome", "status", "finish_reason", "attempts", "waited_s", "prompt_tokens",
        "completion_tokens", "reasoning_tokens", "tokens_estimated", "tokens_estimated_by", "cost_usd",
        "reasoning", "reasoning_chars", "answer",
    }  # fmt: skip
    assert call["outcome"] == "answered" and call["reasoning"] == "thinking it over"
    assert LLMCall.from_summary(call).reasoning_chars == len("thinking it over")  # the protocol's form
    assert decision.usage.reasoning_tokens == 12 and decision.usage.unknown_usage_calls is None


# --- the call store: every call kept, replayed whatever it ended as --------------------------


async def test_failed_calls_are_recorded_and_replayed(
    standin: OpenAIStandIn, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin.script = [
        Scene("status", status=429, body="{}", headers={"retry-after-ms": "10"}),
        Scene("raw", body=HTML, content_type="text/html"),
    ]
    standin.default = Scene(content="<think>a?</think>b", finish_reason="stop")
    folder = tmp_path / "llm"
    monkeypatch.setenv("SPIELBUS_LLM_RECORD", str(folder))
    with metered() as first:
        original = await ask(client(standin))
    monkeypatch.delenv("SPIELBUS_LLM_RECORD")
    monkeypatch.setenv("SPIELBUS_LLM_REPLAY", str(folder))
    await standin.stop()  # nothing answers a replay but the recording
    with metered() as again:
        replayed = await ask(client(standin))
    assert replayed.text == original.text == "b"
    assert again.calls == first.calls
    (line,) = (folder / "calls-agent.jsonl").read_text().splitlines()
    stored = json.loads(line)
    assert (stored["outcome"], stored["attempts"], stored["reasoning"]) == ("answered", 3, "a?")


async def test_a_config_error_replays_as_one(
    standin: OpenAIStandIn, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    standin.refuse = {"seed"}
    monkeypatch.setenv("SPIELBUS_LLM_RECORD", str(tmp_path))
    with pytest.raises(LLMConfigError):
        await ask(client(standin, options={"seed": 1}))
    monkeypatch.delenv("SPIELBUS_LLM_RECORD")
    monkeypatch.setenv("SPIELBUS_LLM_REPLAY", str(tmp_path))
    with pytest.raises(LLMConfigError) as err:
        await ask(client(standin, options={"seed": 1}))
    assert err.value.param == "seed"
    assert Tape(tmp_path, replay=True).replay


# --- Ollama ----------------------------------------------------------------------------------


async def test_ollama_thinking_and_errors() -> None:
    s = OllamaStandIn()
    await s.start()
    s.thinking = "a is a trap"
    s.statuses = [503]
    s.replies = ["b"]
    c = LLMClient(
        LLMConfig(backend="ollama", base_url=s.url, cache=False, backoff_s=0.05, options={"think": True})
    )
    try:
        with metered() as meter:
            result = await c.chat([("user", "hi")], choices=["a", "b"], constrain=False)
        assert result.choice == "b" and result.reasoning == ["a is a trap"]
        assert s.requests[-1]["think"] is True and s.requests[-1]["options"]["num_predict"] == 48 + 4096
        assert meter.calls[0]["attempts"] == 2 and meter.calls[0]["outcome"] == "answered"
        s.done_reason = "length"
        s.replies = ["<think>a or"]
        with pytest.raises(LLMTruncated):
            await c.chat([("user", "again")], choices=["a", "b"], constrain=False)
        s.statuses = [404]
        with metered() as meter, pytest.raises(LLMConfigError):
            await c.chat([("user", "third")])
        assert meter.calls[0]["attempts"] == 1 and meter.calls[0]["status"] == 404
    finally:
        await c.aclose()
        await s.stop()


# --- the pieces: statuses, waits, thinking ---------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "outcome"),
    [
        (408, "", "provider"), (409, "", "provider"), (429, "", "provider"), (500, "", "provider"),
        (502, HTML, "provider"), (503, "", "provider"), (529, "", "provider"), (400, "bad", "config"),
        (401, "", "config"), (403, "", "config"), (404, "", "config"), (422, "", "config"),
        (400, '{"error": {"code": "content_filter"}}', "filtered"),
    ],
)  # fmt: skip
def test_status_classes(status: int, body: str, outcome: str) -> None:
    assert status_outcome(status, body) == outcome


def test_retry_after_forms() -> None:
    assert retry_after({"retry-after": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "250", "retry-after": "7"}) == 0.25
    assert retry_after({"retry-after": "soon"}) is None and retry_after({"retry-after": "-3"}) is None
    assert retry_after({"retry-after": "nan"}) is None and retry_after(None) is None
    later = retry_after({"retry-after": "Wed, 21 Oct 2099 07:28:00 GMT"})
    assert later is not None and later > 1e9
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0


def test_refused_param_from_body_or_message() -> None:
    assert refused_param('{"error": {"message": "no", "param": "top_p"}}') == "top_p"
    assert refused_param("Unsupported value: 'temperature' does not support 0.0") == "temperature"
    assert refused_param("Incorrect API key provided") is None


@pytest.mark.parametrize(
    ("content", "field", "answer", "thinking"),
    [
        ("b", None, "b", ""),
        ("b", "why b", "b", "why b"),
        ("<think>a?</think> b", None, "b", "a?"),
        ("<THINKING>a?</THINKING>b", None, "b", "a?"),
        ("<think>a, no, still", None, "", "a, no, still"),
        ("a? no.</think>b", None, "b", "a? no."),
        ("<think>x</think><think>y</think>b", "z", "b", "z\n\nx\n\ny"),
    ],
)
def test_split_thinking(content: str, field: str | None, answer: str, thinking: str) -> None:
    assert split_thinking(content, field) == (answer, thinking)


def test_which_failed_decisions_are_the_providers() -> None:
    provider_call = CallRecord(id="p", outcome="provider", attempts=1).summary()
    down = LLMUnavailable("down")
    fresh = UsageMeter()
    assert provider_failed(down, fresh)  # an outage before any call
    assert not provider_failed(TimeSpent("no time"), UsageMeter())  # nothing sent: the agent's
    assert not provider_failed(LLMTimeout("slow search"), UsageMeter(), own_clock=True)  # its own work
    failed = UsageMeter()
    failed.add_outcome("provider", provider_call)
    assert provider_failed(LLMTimeout("cut"), failed, own_clock=True)  # cut while the provider hung
    answered = UsageMeter()
    answered.add_outcome("answered", {})
    answered.add_outcome("provider", provider_call)
    assert not provider_failed(down, answered)  # the model played part of it
    cached = UsageMeter(cache_hits=1)
    cached.add_outcome("provider", provider_call)
    assert not provider_failed(down, cached)
