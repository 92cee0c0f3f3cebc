"""Submitting a tournament to the referee workers and collecting its records.

`submit` publishes every match spec to the `SPIELBUS_SCHEDULE` work queue (with
the match id as `Nats-Msg-Id`, so a resubmission is deduplicated) after it has
subscribed to the `ended` events of `SPIELBUS_MATCHES`, so no record can slip by.
Each record is appended to the run folder's `matches.jsonl` as it arrives and
flushed, so an interrupted run keeps every match it finished. A record seen
twice (a redelivered spec replayed by another worker) is kept once.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import ValidationError

from bus.protocol import MatchEvent, MatchRecord, MatchSpec
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee import pgn
from referee.config import TournamentConfig
from referee.ratings import Rating, Standing, ratings, standings


def tournament_id(config: TournamentConfig, now: float | None = None) -> str:
    return f"{config.name}-{time.strftime('%Y%m%d-%H%M%S', time.localtime(now or time.time()))}"


class RunFolder:
    """`<run_dir>/<tournament id>/`: matches.jsonl, standings.json, ratings.json, tournament.toml."""

    def __init__(self, root: str | Path, tid: str) -> None:
        self.path = Path(root) / tid
        self.path.mkdir(parents=True, exist_ok=True)
        self.matches = self.path / "matches.jsonl"
        self._fh = self.matches.open("a", encoding="utf-8")

    def append(self, record: MatchRecord) -> None:
        self._fh.write(record.model_dump_json() + "\n")
        self._fh.flush()
        pgn.observe(self.path, record)  # chess matches also as pgn/<match id>.pgn

    def write_summary(self, table: list[Standing], rates: list[Rating], extra: dict[str, object]) -> None:
        (self.path / "standings.json").write_text(
            json.dumps([s.model_dump() for s in table], indent=2), encoding="utf-8"
        )
        (self.path / "ratings.json").write_text(
            json.dumps([r.model_dump() for r in rates], indent=2), encoding="utf-8"
        )
        (self.path / "summary.json").write_text(json.dumps(extra, indent=2, default=str), encoding="utf-8")

    def close(self) -> None:
        self._fh.close()


class Collector:
    """Receives the `ended` events of one tournament."""

    def __init__(self, expected: list[str], on_record: Callable[[MatchRecord], None]) -> None:
        self.expected = set(expected)
        self.records: dict[str, MatchRecord] = {}
        self.on_record = on_record
        self.done = asyncio.Event()
        self.started: set[str] = set()
        if not self.expected:
            self.done.set()

    async def on_msg(self, msg: Msg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        if event.match_id not in self.expected:
            return
        if event.type == "started":
            self.started.add(event.match_id)
            return
        if event.type != "ended" or event.record is None or event.match_id in self.records:
            return
        self.records[event.match_id] = event.record
        self.on_record(event.record)
        if len(self.records) == len(self.expected):
            self.done.set()


async def submit_and_collect(
    nc: NATS,
    specs: list[MatchSpec],
    subjects: Subjects,
    on_record: Callable[[MatchRecord], None],
    *,
    stall_warning: Callable[[], None] | None = None,
    stall_after: float = 15.0,
) -> list[MatchRecord]:
    js = nc.jetstream()
    await ensure_streams(js, subjects)
    collector = Collector([s.match_id for s in specs], on_record)
    sub_end = await js.subscribe(
        subjects.match_all("ended"),
        cb=collector.on_msg,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.NEW,
        stream=subjects.matches_stream,
    )
    sub_start = await nc.subscribe(subjects.match_all("started"), cb=collector.on_msg)
    try:
        for spec in specs:
            await js.publish(
                subjects.schedule,
                spec.model_dump_json().encode(),
                headers={"Nats-Msg-Id": spec.match_id},
                timeout=10,
            )
        warned = False
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        while not collector.done.is_set():
            try:
                await asyncio.wait_for(collector.done.wait(), timeout=1.0)
            except TimeoutError:
                pass
            if (
                not warned
                and stall_warning is not None
                and not collector.started
                and loop.time() - t0 > stall_after
            ):
                stall_warning()
                warned = True
    finally:
        await sub_end.unsubscribe()
        await sub_start.unsubscribe()
    return [collector.records[s.match_id] for s in specs if s.match_id in collector.records]


def summarize(records: list[MatchRecord], config: TournamentConfig) -> tuple[list[Standing], list[Rating]]:
    return standings(records), ratings(records, config.ratings, seed=config.seed)
