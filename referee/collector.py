"""Submitting a tournament to the referee workers and collecting its records into its run folder
(referee/run_folder.py).

`submit_and_collect` subscribes to the `ended` events of `SPIELBUS_MATCHES` (from the
stream's current end, by sequence number) before it publishes every match spec to the
`SPIELBUS_SCHEDULE` work queue (with the match id as `Nats-Msg-Id`, so a resubmission is
deduplicated), so no record can slip by. Each record is appended to the run folder's
`matches.jsonl` as it arrives and flushed, so an interrupted run keeps every match it
finished; `spielbus collect` rebuilds the rest from the stream.

The collector never waits silently:

- It keeps the first *valid* `ended` record per match id, in stream order: for a spec it
  scheduled (the match id, tournament, game and seats agree with the spec) and carrying the
  spec's chance secret, which only referee accounts can read from the work queue; under
  accounts only the referee may publish match events at all. Anything else is ignored.
- It listens to JetStream's advisories for the schedule's consumer: a spec delivered
  `max_deliver` times without an ack (`MAX_DELIVERIES`), or terminated by a worker
  (`MSG_TERMINATED`), has failed for good and is reported as failed.
- A spec published while the bus is away is sent again until JetStream acknowledges it
  (`bus.streams.publish_stored`; the match id as `Nats-Msg-Id` stores it once).
- A lost bus connection is caught up: after a reconnect it re-reads the stream from the
  last sequence it saw, so no record is missed and none counted twice.
- It gives up after an overall deadline (`deadline_s`) or when no match of the tournament
  has made progress (no event at all: started, moved, forfeit, ended) for `idle_s`, and
  reports the matches without a record.
- A run folder it cannot write to (full disk, read-only) stops the run with `RunFolderError`;
  the stream keeps every record.

It waits on events, not by polling: a record or advisory (the collector's `done`), the `stop`
event, the connection coming back or closing (`bus.conn_events`), a probe hearing a move, and
timers for the deadline, the idle limit, the probe and the stall warning, each re-armed from the
last progress when it fires. The parts: `Collector` judges events, `_Listening` holds the
subscriptions, `_Timers` the time limits, `_submit` publishes, `_await_records` waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import ValidationError

from bus import conn_events
from bus.protocol import MatchEvent, MatchRecord, MatchSpec
from bus.streams import ensure_streams, publish_stored
from bus.subjects import Subjects
from referee.acceptance import record_problem
from referee.run_folder import RunFolderError
from referee.wake import any_set
from referee.worker import DURABLE

log = logging.getLogger(__name__)

DEFAULT_IDLE_S = 600.0


class CollectStopped(Exception):
    """`submit_and_collect`'s `stop` event was set (SIGINT/SIGTERM)."""


@dataclass
class Collector:
    """Judges the events of one tournament's matches: keeps the first valid `ended` record per
    scheduled spec (`record_problem`), hands it to `on_record`, marks specs failed from the
    schedule consumer's advisories or when the run gives up, and notes progress (any event of
    ours) for the idle limit. `done` is set once every spec is recorded or failed, or `on_record`
    could not write (`error`). It does no I/O of its own: `submit_and_collect` feeds it."""

    specs: list[MatchSpec]
    on_record: Callable[[MatchRecord], None]
    # False (what `spielbus run` does): keep only the ids of the recorded matches, never the
    # records (the run folder has them): a long run holds no per-record objects, so its memory and
    # its full garbage collections stay flat (benchmarks/soak.py measures both).
    keep: bool = True
    records: dict[str, MatchRecord] = field(default_factory=dict)
    recorded: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    rejected: int = 0
    error: BaseException | None = None
    last_seq: int = 0
    last_progress: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.by_id = {s.match_id: s for s in self.specs}
        self.by_schedule_seq: dict[int, str] = {}
        self.done = asyncio.Event()
        self._check_done()

    def _check_done(self) -> None:
        if self.error is not None or len(self.recorded) + len(self.failed) >= len(self.by_id):
            self.done.set()

    def progress(self) -> None:
        self.last_progress = time.monotonic()

    def on_event(self, event: MatchEvent, seq: int | None = None) -> None:
        if seq is not None:
            if seq <= self.last_seq:
                return  # seen before a resubscription
            self.last_seq = seq
        spec = self.by_id.get(event.match_id)
        if spec is None:
            return
        self.progress()
        if event.type == "started":
            self.started.add(event.match_id)
            return
        if event.type != "ended" or event.match_id in self.recorded:
            return
        problem = record_problem(spec, event)
        if problem is not None:
            self.rejected += 1
            log.warning("ignoring an ended event for %s: %s", event.match_id, problem)
            return
        assert event.record is not None
        self.recorded.add(event.match_id)
        if self.keep:
            self.records[event.match_id] = event.record
        self.failed.pop(event.match_id, None)
        try:
            self.on_record(event.record)
        except RunFolderError as exc:
            self.error = exc
        self._check_done()

    async def on_msg(self, msg: Msg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        seq = None
        with contextlib.suppress(Exception):
            seq = int(msg.metadata.sequence.stream)
        self.on_event(event, seq)

    def ours(self, subject: str) -> bool:
        """Whether a match event's subject names one of our matches (read without parsing the event)."""
        parts = subject.split(".")
        return len(parts) >= 2 and parts[-2] in self.by_id

    async def on_activity(self, msg: Msg) -> None:
        """Any event of one of our matches (`moved`, `forfeit`) is progress; read from the subject
        alone, so the collector does not parse every event on the bus."""
        if self.ours(msg.subject):
            self.progress()

    async def on_advisory(self, msg: Msg) -> None:
        """JetStream's MAX_DELIVERIES / MSG_TERMINATED advisory for the schedule's consumer."""
        try:
            adv = json.loads(msg.data)
            mid = self.by_schedule_seq.get(int(adv["stream_seq"]))
        except (ValueError, KeyError, TypeError):
            return
        if mid is None or mid in self.recorded:
            return
        kind = str(adv.get("type", ""))
        if "terminated" in kind:
            reason = "the referee terminated its spec"
        else:
            reason = f"its spec failed {adv.get('deliveries', '?')} deliveries (JetStream max_deliver)"
        self.failed[mid] = reason
        log.warning("match %s failed for good: %s", mid, reason)
        self.progress()
        self._check_done()

    def give_up(self, reason: str) -> None:
        for mid in self.by_id:
            if mid not in self.recorded and mid not in self.failed:
                self.failed[mid] = reason
        self._check_done()


class _Listening:
    """The collector's subscriptions: `ended` from the match stream by sequence (subscribed again
    from the last sequence seen after a reconnect: `catch_up`), `started` and `forfeit` as progress,
    the schedule consumer's advisories, and, while the run is quiet, a probe on `moved`."""

    def __init__(self, nc: NATS, subjects: Subjects, collector: Collector) -> None:
        self.nc = nc
        self.subjects = subjects
        self.collector = collector
        self.ended: JetStreamContext.PushSubscription | None = None
        self.others: list[Subscription] = []
        # Moves are progress too, but hearing every one costs this process and the server a message
        # per move: `moved` is listened to only while the run has been quiet
        # for half its idle limit, until progress is heard (`heard` is set on one of our moves).
        self.probe: Subscription | None = None
        self.probe_from = 0.0
        self.heard = asyncio.Event()

    async def open(self, start_seq: int) -> None:
        c, subjects = self.collector, self.subjects
        self.ended = await self._subscribe_ended(start_seq)
        self.others.append(await self.nc.subscribe(subjects.match_all("started"), cb=c.on_msg))
        self.others.append(await self.nc.subscribe(subjects.match_all("forfeit"), cb=c.on_activity))
        for kind in ("MAX_DELIVERIES", "MSG_TERMINATED"):
            subject = f"$JS.EVENT.ADVISORY.CONSUMER.{kind}.{subjects.schedule_stream}.{DURABLE}"
            self.others.append(await self.nc.subscribe(subject, cb=c.on_advisory))

    async def _subscribe_ended(self, start_seq: int) -> JetStreamContext.PushSubscription:
        return await self.nc.jetstream().subscribe(
            self.subjects.match_all("ended"),
            cb=self.collector.on_msg,
            ordered_consumer=True,
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=max(start_seq, 1)
            ),
            stream=self.subjects.matches_stream,
        )

    async def catch_up(self) -> bool:
        """After a reconnect: read the stream again from the last record seen (False: failed)."""
        seq = self.collector.last_seq + 1
        log.warning("collector: the bus reconnected; catching up from stream sequence %d", seq)
        if self.ended is not None:
            with contextlib.suppress(Exception):
                await self.ended.unsubscribe()
            self.ended = None
        try:
            self.ended = await self._subscribe_ended(seq)
        except Exception:
            log.warning("collector: catching up failed; trying again", exc_info=True)
            return False
        return True

    async def follow_quiet(self, idle_s: float | None) -> None:
        """Probe `moved` while the run has been quiet for half `idle_s`; stop once progress is heard."""
        self.heard.clear()
        last = self.collector.last_progress
        if self.probe is not None and last != self.probe_from:
            with contextlib.suppress(Exception):
                await self.probe.unsubscribe()
            self.probe = None
        if self.probe is None and idle_s is not None and time.monotonic() - last > idle_s / 2:
            self.probe_from = last
            self.probe = await self.nc.subscribe(self.subjects.match_all("moved"), cb=self._on_moved)

    async def _on_moved(self, msg: Msg) -> None:
        if self.collector.ours(msg.subject):
            self.collector.progress()
            self.heard.set()

    async def close(self) -> None:
        for sub in (self.ended, *self.others, self.probe):
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()


@dataclass
class _Timers:
    """When the collector must act without an event: give up at the overall deadline or after
    `idle_s` without progress, probe `moved` after half of that, warn once when no match has
    started after `stall_after`, and retry a failed catch-up."""

    t0: float
    deadline_s: float | None
    idle_s: float | None
    stall_after: float
    stall_warning: Callable[[], None] | None
    retry_catch_up_at: float | None = None

    def next_wake(self, collector: Collector, probing: bool) -> float | None:
        """Seconds until the next timer (None: no timer)."""
        due = [] if self.retry_catch_up_at is None else [self.retry_catch_up_at]
        if self.deadline_s is not None:
            due.append(self.t0 + self.deadline_s)
        if self.idle_s is not None:
            due.append(collector.last_progress + self.idle_s)
            if not probing:
                due.append(collector.last_progress + self.idle_s / 2)
        if self.stall_warning is not None and not collector.started:
            due.append(self.t0 + self.stall_after)
        return max(min(due) - time.monotonic(), 0.0) if due else None

    def check(self, collector: Collector) -> None:
        now = time.monotonic()
        if self.deadline_s is not None and now - self.t0 > self.deadline_s:
            collector.give_up(f"no record within the run's deadline of {self.deadline_s:.0f} s")
        elif self.idle_s is not None and now - collector.last_progress > self.idle_s:
            collector.give_up(f"no match of the tournament made progress for {self.idle_s:.0f} s")
        if self.stall_warning is not None and not collector.started and now - self.t0 > self.stall_after:
            self.stall_warning()
            self.stall_warning = None  # once


async def _stream_end(nc: NATS, stream: str) -> int:
    info = await nc.jetstream().stream_info(stream)
    return int(info.state.last_seq)


async def _submit(
    js: JetStreamContext,
    subjects: Subjects,
    specs: list[MatchSpec],
    collector: Collector,
    stop: asyncio.Event | None,
) -> None:
    """Publish every spec to the work queue (stored; deduplicated by match id)."""
    for spec in specs:
        if stop is not None and stop.is_set():
            raise CollectStopped()
        ack = await publish_stored(js, subjects.schedule, spec.model_dump_json().encode(), spec.match_id)
        collector.by_schedule_seq[int(ack.seq)] = spec.match_id
    collector.progress()


async def _await_records(
    nc: NATS,
    collector: Collector,
    listening: _Listening,
    timers: _Timers,
    bus_changed: asyncio.Event,
    stop: asyncio.Event | None,
) -> None:
    """Until every spec is recorded or failed: woken by the collector, `stop`, the connection
    (reconnected or closed), a probe hearing progress, or a timer, never by a poll."""
    wake_on = [collector.done, bus_changed, listening.heard, *([stop] if stop is not None else [])]
    while not collector.done.is_set():
        await any_set(wake_on, timers.next_wake(collector, listening.probe is not None))
        if collector.done.is_set():
            break
        if stop is not None and stop.is_set():
            raise CollectStopped()
        if nc.is_closed:
            raise ConnectionError(
                "lost the NATS connection for good; the stream keeps every record: "
                "`spielbus collect` completes the run folder once the bus is back"
            )
        retry = timers.retry_catch_up_at
        if bus_changed.is_set() or (retry is not None and time.monotonic() >= retry):
            bus_changed.clear()
            timers.retry_catch_up_at = None
            if nc.is_connected and not await listening.catch_up():
                timers.retry_catch_up_at = time.monotonic() + 1.0
        await listening.follow_quiet(timers.idle_s)
        timers.check(collector)


async def submit_and_collect(
    nc: NATS,
    specs: list[MatchSpec],
    subjects: Subjects,
    on_record: Callable[[MatchRecord], None],
    *,
    stall_warning: Callable[[], None] | None = None,
    stall_after: float = 15.0,
    deadline_s: float | None = None,
    idle_s: float | None = DEFAULT_IDLE_S,
    collector: Collector | None = None,
    stop: asyncio.Event | None = None,
) -> list[MatchRecord]:
    """Publish `specs` and wait for their records (returned in spec order unless the collector
    was made with `keep=False`: then the list is empty and the run folder has them). Failed
    matches are in `collector.failed`; raises `RunFolderError` when a record cannot be written,
    `CollectStopped` when `stop` is set."""
    js = nc.jetstream()
    await ensure_streams(js, subjects)
    collector = collector or Collector(specs, on_record)
    start = await _stream_end(nc, subjects.matches_stream) + 1
    collector.last_seq = start - 1
    listening = _Listening(nc, subjects, collector)
    with conn_events.watch(nc) as bus_changed:
        try:
            await listening.open(start)
            await _submit(js, subjects, specs, collector, stop)
            timers = _Timers(time.monotonic(), deadline_s, idle_s, stall_after, stall_warning)
            await _await_records(nc, collector, listening, timers, bus_changed, stop)
        finally:
            await listening.close()
    if collector.error is not None:
        raise collector.error
    return [collector.records[s.match_id] for s in specs if s.match_id in collector.records]
