"""`spielbus analyst`: matches played through the real referee, their events stored in the match
stream by the referee's own publisher, scored by the analyst from the stream as they end; the same
rows `spielbus analyse` gives for the same records, its Prometheus gauges at the figures of those rows,
and a restart scores nothing twice."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from analysis.match import Judges, Settings, analyse_match
from analysis.scale import MoveAnalysis
from analysis.summary import agent_quality
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee.match import MatchRunner
from referee.worker import EventPublisher
from spielbus.analyst import QualityMetrics, serve
from tests.helpers import serving, spec, uid, until

S = Subjects(prefix=f"an{uid('')[-6:]}")


def rows_in(path: Path) -> list[MoveAnalysis]:
    if not path.is_file():
        return []
    return [MoveAnalysis.model_validate_json(x) for x in path.read_text().splitlines() if x.strip()]


async def test_the_analyst_scores_each_match_as_it_ends(nc, tmp_path: Path) -> None:
    await ensure_streams(nc.jetstream(), S)
    publisher = EventPublisher(nc, S)
    out = tmp_path / "live"
    a, b = uid("r"), uid("r")
    records = []
    stop = asyncio.Event()
    metrics = QualityMetrics()
    analyst = asyncio.create_task(serve(nc, S, out, Settings(), stop, metrics=metrics))
    async with serving(nc, RandomStrategy(StrategyOptions(seed=1)), a, subjects=S):
        async with serving(nc, RandomStrategy(StrategyOptions(seed=2)), b, subjects=S):
            for seed in (1, 2):
                match = spec("tic_tac_toe", [a, b], seed=seed)
                records.append(await MatchRunner(nc, match, subjects=S, publish_event=publisher).run())
    path = out / "analysis.jsonl"
    want = sum(1 for r in records for m in r.moves)
    await until(lambda: len(rows_in(path)) == want, "every move of both matches scored", timeout_s=120)
    stop.set()
    await analyst

    judges = Judges()
    expected = [row for rec in records for row in analyse_match(rec, judges)]
    strip = lambda rows: [r.model_copy(update={"analysis_ms": 0.0}) for r in rows]  # noqa: E731
    assert strip(rows_in(path)) == strip(expected)

    # Prometheus: each agent's figures as `spielbus analyse` computes them from the same rows.
    table = agent_quality(expected)
    assert {q.agent for q in table} == {a, b}
    for q in table:
        labels = {"game": q.game, "agent": q.agent, "reference": q.reference}
        sample = metrics.registry.get_sample_value
        assert sample("spielbus_move_accuracy_percent", labels) == q.accuracy.value
        assert sample("spielbus_move_accuracy_percent_low", labels) == q.accuracy.lo
        assert sample("spielbus_move_mean_loss_high", labels) == q.mean_wc_loss.hi
        assert sample("spielbus_move_blunders_per_100", labels) == q.blunders_per_100.value
        assert sample("spielbus_move_scored", labels) == q.moves

    # A restart reads the stream from the start again and finds nothing new to score.
    stop = asyncio.Event()
    again = asyncio.create_task(serve(nc, S, out, Settings(), stop))
    await asyncio.sleep(1.0)
    stop.set()
    await again
    assert len(rows_in(path)) == want
