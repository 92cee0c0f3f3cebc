"""Prometheus metrics: referee side from real matches over the bus, agent side from the runtime's
observer and the LLM hook, the HTTP endpoints, and `spielbus run` saying where to look."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from agents.llm.hooks import record_llm_call
from agents.metrics import AGENT_METRICS, AgentMetrics, install
from agents.random_agent import FirstLegalStrategy, RandomStrategy
from bus.process import free_port
from bus.protocol import FaultPolicy, MatchEvent, MatchRecord, Turn, Usage
from observability.metrics import REFEREE_METRICS, MergedCollector, RefereeMetrics, serve_metrics
from referee.match import MatchRunner
from referee.ratings import Rating
from tests.helpers import raw_responder, serving, spec, uid

ROOT = Path(__file__).resolve().parents[1]


def samples(registry: CollectorRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return samples(registry).get((name, tuple(sorted(labels.items()))), 0.0)


def total(registry: CollectorRegistry, name: str, **labels: str) -> float:
    """Sum over every series of `name` whose labels include `labels`."""
    return sum(
        v
        for (n, ls), v in samples(registry).items()
        if n == name and all(dict(ls).get(k) == x for k, x in labels.items())
    )


async def play_metered(nc, match, metrics: RefereeMetrics) -> tuple[MatchRecord, list[MatchEvent]]:
    events: list[MatchEvent] = []

    async def sink(ev: MatchEvent) -> None:
        events.append(ev)
        metrics.on_event(ev)

    return await MatchRunner(nc, match, publish_event=sink).run(), events


async def test_referee_metrics_match_the_record(nc) -> None:
    a, b = uid("ra"), uid("rb")
    m = RefereeMetrics()
    async with (
        serving(nc, RandomStrategy(StrategyOptions(seed=1)), a),
        serving(nc, FirstLegalStrategy(StrategyOptions()), b),
    ):
        rec, _ = await play_metered(nc, spec("tic_tac_toe", [a, b]), m)
    r = m.registry
    per_agent = Counter(mv.agent for mv in rec.moves if mv.agent)
    for agent in (a, b):
        assert value(r, "spielbus_moves_total", game="tic_tac_toe", agent=agent) == per_agent[agent]
        assert (
            value(r, "spielbus_turn_latency_seconds_count", game="tic_tac_toe", agent=agent)
            == (per_agent[agent])
        )
        # Buckets reach minutes (LLM turns); the last finite bucket is ten minutes.
        assert (
            "spielbus_turn_latency_seconds_bucket",
            tuple(sorted({"game": "tic_tac_toe", "agent": agent, "le": "600.0"}.items())),
        ) in samples(r)
    assert value(r, "spielbus_matches_total", game="tic_tac_toe", outcome=rec.outcome) == 1
    assert value(r, "spielbus_matches_in_flight", game="tic_tac_toe") == 0
    results = total(r, "spielbus_agent_results_total", agent=a) + total(
        r, "spielbus_agent_results_total", agent=b
    )
    assert results == 2
    if rec.outcome == "decisive":
        winner = rec.seats[rec.ranks.index(1)]
        assert value(r, "spielbus_agent_results_total", game="tic_tac_toe", agent=winner, result="win") == 1
    # No match id anywhere: labels are bounded.
    assert rec.match_id not in generate_latest(r).decode()


async def test_in_flight_gauge_counts_a_running_match(nc) -> None:
    a, b = uid("fa"), uid("fb")
    m = RefereeMetrics()
    seen_in_flight: list[float] = []

    async def sink(ev: MatchEvent) -> None:
        m.on_event(ev)
        if ev.type == "moved":
            seen_in_flight.append(value(m.registry, "spielbus_matches_in_flight", game="tic_tac_toe"))

    async with (
        serving(nc, FirstLegalStrategy(StrategyOptions()), a),
        serving(nc, FirstLegalStrategy(StrategyOptions()), b),
    ):
        await MatchRunner(nc, spec("tic_tac_toe", [a, b]), publish_event=sink).run()
    assert seen_in_flight and set(seen_in_flight) == {1.0}
    assert value(m.registry, "spielbus_matches_in_flight", game="tic_tac_toe") == 0


async def test_faults_counted_once_by_reason_under_retry(nc) -> None:
    """Under `retry` the faults that do not end the match reach no event; they are counted from the
    record at the end, and the forfeit's own fault (which has an event) is not counted twice."""
    bad, good = uid("bad"), uid("good")
    m = RefereeMetrics()

    async def garbage(turn: Turn, msg) -> bytes:
        return b"{not json"

    async with raw_responder(nc, bad, garbage), serving(nc, FirstLegalStrategy(StrategyOptions()), good):
        rec, events = await play_metered(
            nc, spec("tic_tac_toe", [bad, good], policy=FaultPolicy(kind="retry", retries=2)), m
        )
    assert rec.outcome == "forfeit"
    assert [f.reason for f in rec.faults] == ["malformed"] * 3
    assert any(e.type == "forfeit" for e in events)
    assert value(m.registry, "spielbus_faults_total", game="tic_tac_toe", agent=bad, reason="malformed") == 3
    assert value(m.registry, "spielbus_matches_total", game="tic_tac_toe", outcome="forfeit") == 1
    assert (
        value(m.registry, "spielbus_agent_results_total", game="tic_tac_toe", agent=bad, result="loss") == 1
    )


async def test_timeouts_and_no_responder(nc) -> None:
    silent, good, absent = uid("silent"), uid("good"), uid("absent")
    m = RefereeMetrics()

    async def nothing(turn: Turn, msg) -> None:
        return None

    async with raw_responder(nc, silent, nothing), serving(nc, FirstLegalStrategy(StrategyOptions()), good):
        await play_metered(nc, spec("tic_tac_toe", [silent, good], deadline_ms=200), m)
        await play_metered(nc, spec("tic_tac_toe", [good, absent]), m)
    r = m.registry
    assert value(r, "spielbus_faults_total", game="tic_tac_toe", agent=silent, reason="timeout") == 1
    # A timeout is a turn the referee waited the whole deadline for.
    assert value(r, "spielbus_turn_latency_seconds_count", game="tic_tac_toe", agent=silent) == 1
    assert value(r, "spielbus_faults_total", game="tic_tac_toe", agent=absent, reason="no_responder") == 1
    # no_responder is not a turn: nobody was asked.
    assert value(r, "spielbus_turn_latency_seconds_count", game="tic_tac_toe", agent=absent) == 0


async def test_hidden_steps_are_counted_when_the_match_ends(nc) -> None:
    a, b = uid("ka"), uid("kb")
    m = RefereeMetrics()
    async with (
        serving(nc, RandomStrategy(StrategyOptions(seed=2)), a),
        serving(nc, RandomStrategy(StrategyOptions(seed=3)), b),
    ):
        rec, events = await play_metered(nc, spec("phantom_ttt", [a, b]), m)
    hidden = [e for e in events if e.type == "moved" and e.hidden and e.move and e.move.agent]
    assert hidden, "phantom tic-tac-toe moves are private until the match ends"
    per_agent = Counter(mv.agent for mv in rec.moves if mv.agent)
    game = rec.game.label()
    for agent in (a, b):
        assert value(m.registry, "spielbus_moves_total", game=game, agent=agent) == per_agent[agent]
        assert (
            value(m.registry, "spielbus_turn_latency_seconds_count", game=game, agent=agent)
            == (per_agent[agent])
        )


def test_ratings_gauges() -> None:
    m = RefereeMetrics()
    m.set_ratings([Rating(agent="x", elo=1510.0, bt=1600.0, bt_low=1500.0, bt_high=1700.0)])
    assert value(m.registry, "spielbus_rating_elo", agent="x") == 1510.0
    assert value(m.registry, "spielbus_rating_bt", agent="x") == 1600.0


class _Spender(Strategy):
    """Pretends to be an LLM strategy: fixed usage per move."""

    kind = "spender"

    def models(self) -> list[str]:
        return ["tiny-model"]

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        usage = Usage(llm_calls=2, prompt_tokens=100, completion_tokens=7, cache_hits=1)
        return Decision(action=turn.legal_actions[0].id, usage=usage)


class _Crasher(Strategy):
    kind = "crasher"

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        raise RuntimeError("boom")


async def test_agent_metrics_from_the_runtime_observer(nc) -> None:
    spender, crasher, other = uid("sp"), uid("cr"), uid("ot")
    am = AgentMetrics(spender, _Spender(StrategyOptions()).models())
    cm = AgentMetrics(crasher)
    async with (
        serving(nc, _Spender(StrategyOptions()), spender, on_turn=am.observe_turn),
        serving(nc, _Crasher(StrategyOptions()), crasher, on_turn=cm.observe_turn),
        serving(nc, FirstLegalStrategy(StrategyOptions()), other),
    ):
        rec, _ = await play_metered(nc, spec("tic_tac_toe", [spender, other]), RefereeMetrics())
        await play_metered(nc, spec("tic_tac_toe", [crasher, other]), RefereeMetrics())
    n = sum(1 for mv in rec.moves if mv.agent == spender)
    r, lbl = am.registry, {"agent": spender, "model": "tiny-model"}
    assert value(r, "spielbus_agent_turns_total", result="ok", **lbl) == n
    assert value(r, "spielbus_agent_decision_seconds_count", **lbl) == n
    assert value(r, "spielbus_llm_calls_total", **lbl) == 2 * n
    assert value(r, "spielbus_llm_tokens_total", kind="prompt", **lbl) == 100 * n
    assert value(r, "spielbus_llm_tokens_total", kind="completion", **lbl) == 7 * n
    assert value(r, "spielbus_llm_cache_hits_total", **lbl) == n
    # The referee's record carries the same usage the agent counted.
    assert sum(mv.usage.prompt_tokens for mv in rec.moves if mv.usage and mv.agent == spender) == 100 * n
    assert value(cm.registry, "spielbus_agent_turns_total", agent=crasher, model="none", result="error") == 1


def test_record_llm_call() -> None:
    record_llm_call(None, "m", 0.5, 10, 2, False, False)  # no metrics installed: a no-op
    am = AgentMetrics("solo", ["m"])
    install(am)
    try:
        record_llm_call(None, "m", 0.5, 10, 2, cached=False, error=False)
        record_llm_call(None, "m", 0.0, 0, 0, cached=True, error=False)
        record_llm_call("solo", "other", 3.0, 0, 0, cached=False, error=True)
    finally:
        install(None)
    r = am.registry
    assert value(r, "spielbus_llm_request_seconds_count", agent="solo", model="m") == 1
    assert value(r, "spielbus_llm_requests_total", agent="solo", model="m", result="cached") == 1
    assert value(r, "spielbus_llm_errors_total", agent="solo", model="other") == 1
    assert value(r, "spielbus_llm_request_tokens_sum", agent="solo", model="m", kind="prompt") == 10


def test_declared_names_are_exported() -> None:
    """REFEREE_METRICS / AGENT_METRICS (what docs and dashboards rely on) match the registries."""
    ref = {f.name for f in RefereeMetrics().registry.collect()}
    agent = {f.name for f in AgentMetrics("a").registry.collect()}
    strip = {n.removesuffix("_total") for n in REFEREE_METRICS}
    assert strip == ref
    assert {n.removesuffix("_total") for n in AGENT_METRICS} == agent
    assert all(n.startswith("spielbus_") for n in ref | agent)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


def test_http_endpoint_fallback_and_merge() -> None:
    a1, a2 = AgentMetrics("one"), AgentMetrics("two")
    for am in (a1, a2):
        am.llm_call(None, "m", 1.0, 5, 1, False, False)
    s1, s2 = serve_metrics(a1.registry, 0), serve_metrics(a2.registry, 0)
    ref = RefereeMetrics()
    ref.set_ratings([Rating(agent="one", elo=1500, bt=1500, bt_low=1400, bt_high=1600)])
    ref.registry.register(MergedCollector(lambda: [s1.url, s2.url, "http://127.0.0.1:9/metrics"]))
    # A busy port falls back to a free one when asked to.
    busy = serve_metrics(CollectorRegistry(), 0)
    main = serve_metrics(ref.registry, busy.port, fallback=True)
    try:
        assert main.port != busy.port
        text = _scrape(main.url)
        fams = {f.name: f for f in text_string_to_metric_families(text)}
        assert "spielbus_rating_elo" in fams
        agents = {s.labels.get("agent") for s in fams["spielbus_llm_request_seconds"].samples}
        assert agents == {"one", "two"}, "both children's series, merged under one family"
        # One TYPE line per family: Prometheus rejects duplicates.
        types = re.findall(r"^# TYPE (\S+)", text, flags=re.M)
        assert len(types) == len(set(types))
        with pytest.raises(OSError):
            serve_metrics(CollectorRegistry(), busy.port)
    finally:
        for s in (s1, s2, busy, main):
            s.stop()


@pytest.mark.slow
def test_agent_cli_serves_metrics(nats_url: str) -> None:
    port = free_port()
    env = {**os.environ, "NATS_URL": nats_url}
    p = subprocess.Popen(
        [sys.executable, "-m", "agents", "random", "--name", uid("cli"), "--metrics-port", str(port)],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        lines = [p.stdout.readline(), p.stdout.readline()]
        assert any(f":{port}/metrics" in line for line in lines), lines
        text = _scrape(f"http://127.0.0.1:{port}/metrics")
        assert "spielbus_agent_decision_seconds" in text
    finally:
        p.terminate()
        assert p.wait(timeout=30) == 0


def test_fault_series_exist_at_zero_from_the_first_match() -> None:
    """A clean run's fault panels show zeros, not "no data": every reason of every seated agent has
    a series from the `started` event on."""
    from bus.protocol import FAULT_REASONS, GameSpec, MatchEvent
    from observability.metrics import RefereeMetrics

    ref = RefereeMetrics()
    ref.on_event(
        MatchEvent(type="started", match_id="m", tournament="t", game=GameSpec(name="g"), seats=["a", "b"])
    )
    samples = {
        (s.labels["agent"], s.labels["reason"]): s.value
        for fam in text_string_to_metric_families(generate_latest(ref.registry).decode())
        for s in fam.samples
        if s.name == "spielbus_faults_total"
    }
    assert samples == {(a, r): 0.0 for a in ("a", "b") for r in FAULT_REASONS}


def test_llm_error_series_exists_at_zero_after_a_clean_request() -> None:
    m = AgentMetrics("a", ["model"])
    m.llm_call(None, "model", 0.1, 5, 3, False, False)
    samples = {
        s.name: s.value
        for fam in text_string_to_metric_families(generate_latest(m.registry).decode())
        for s in fam.samples
        if s.name == "spielbus_llm_errors_total"
    }
    assert samples == {"spielbus_llm_errors_total": 0.0}
