"""A referee worker: pulls match specs from `SPIELBUS_SCHEDULE` and plays them.

Any number of workers may pull from the same work queue, on any machine: that is
how refereeing scales. Specs are fetched in batches of the free slots, so
`concurrency` matches really run at once. A spec is acknowledged only after its
match has ended and its `ended` event is stored (JetStream's publish ack); a worker
that dies mid-match leaves the spec to be redelivered (after `ack_wait`) to another
worker. An attempt the bus or the referee failed (`MatchAborted`: a lost
connection, an `ended` event not stored) is handed back at once (nak) and replayed
as the next attempt; its events carry their attempt number. `ended` is published
with `Nats-Msg-Id: <match id>.ended`, so the stream keeps one final record per match
even if a replay ends too; collectors keep the first valid one. A malformed spec is
logged and terminated, never retried (the collector hears of it by advisory).

A match voided by a provider fault (`[policy] provider = "void"`, referee/match.py) is played
again by the same worker, in the same slot, with the same seed, secret and attempt (so the same
chance outcomes), after `provider_wait_s` (doubled after each void, at most 2^8 times): the seat's
LLM endpoint gets time to come back. The slot stays taken meanwhile, so a worker does not start
more matches into an outage. Each void is kept in the final record's `voided`; after
`provider_retries` voided replays the match's `ended` record has outcome `void` (unplayed), and
`spielbus run` reports it and exits 1. A worker told to stop while it waits hands the spec back.

`stop()` drains: no new specs are taken, matches in flight get `drain_grace_s` to
finish, then are cancelled and handed back (nak) for another worker to replay, so
a worker always exits promptly.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Mapping

import nats.errors
import nats.js.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js import JetStreamContext
from nats.js.api import AckPolicy, ConsumerConfig
from pydantic import ValidationError

from bus import conn_events
from bus.protocol import (
    COMPACT,
    TURN_FORM_KEY,
    MatchEvent,
    MatchRecord,
    MatchSpec,
    Provenance,
    VoidedAttempt,
    trim_record,
)
from bus.streams import durable_pull, ensure_streams
from bus.subjects import Subjects
from referee.acceptance import record_problem
from referee.caps import cap_provenance
from referee.match import MatchAborted, MatchRunner, MatchVoided
from referee.presence import DEFAULT_ABSENT_LIMIT_S, Presence
from referee.request import LocalSeat
from referee.service import RefereeService
from referee.wake import any_set

log = logging.getLogger(__name__)
# What a pull raises while the bus is away or JetStream is not serving: transient by nature.
_BUS_AWAY: tuple[type[Exception], ...] = (
    nats.js.errors.ServiceUnavailableError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.NoRespondersError,
    nats.errors.StaleConnectionError,
)

ACK_WAIT_S = 30.0
DURABLE = "referee"
MAX_DELIVER = 5
DRAIN_GRACE_S = 10.0

MatchObserver = Callable[[MatchRecord], Awaitable[None] | None]
# Handed a match's final record once its `ended` bytes are written, before JetStream's ack.
FinalRecord = Callable[[MatchRecord], None]


class EventPublisher:
    """Publishes match events; `ended` goes through JetStream with an ack so the record is stored.
    `encode` and `send` are the two halves of a call, for a caller that hands the record out once
    its bytes are fixed, before the store's ack (`RefereeWorker.play`'s `on_final`)."""

    def __init__(self, nc: NATS, subjects: Subjects) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.subjects = subjects
        self.listeners: list[Callable[[MatchEvent], Awaitable[None] | None]] = []

    async def __call__(self, event: MatchEvent) -> None:
        await self.send(*self.encode(event))

    def encode(self, event: MatchEvent) -> tuple[MatchEvent, bytes]:
        """The event as it is sent (an oversized record trimmed) and its bytes."""
        data = event.model_dump_json(exclude_none=True).encode()
        limit = self.nc.max_payload - 4096  # room for headers and the event's envelope
        if len(data) > limit and event.record is not None:
            # An oversized record would be refused by the server and the match lost to its collector.
            event = event.model_copy(update={"record": trim_record(event.record, limit - 2048)})
            data = event.model_dump_json(exclude_none=True).encode()
        return event, data

    async def send(self, event: MatchEvent, data: bytes) -> None:
        """Publish `encode`'s result; raises when an `ended` record is not stored."""
        subject = self.subjects.match(event.match_id, event.type)
        if event.type == "ended":
            # Raises when the record is not stored: the match is then replayed, never lost.
            ack = await self.js.publish(
                subject, data, timeout=10, headers={"Nats-Msg-Id": f"{event.match_id}.ended"}
            )
            if ack.duplicate:
                log.warning(
                    "match %s: an ended record is already stored; the first one stands", event.match_id
                )
                return
        else:
            await self.nc.publish(subject, data)
        for listener in self.listeners:
            res = listener(event)
            if asyncio.iscoroutine(res):
                await res


class ProvenanceCache:
    """Agent kind, version and models from `$SRV.INFO.<name>`, asked again at every match start,
    and whether the agent asks for compact turns (`compact`: metadata `"turns": "compact"`).

    A bot restarted with a changed prompt or model announces a new `options_hash`/models, and the
    next match's record must carry it (a new ladder entry, a new row when split by provenance).
    Asking each time is the cheapest correct choice: one small request per seat per match, no
    stale window (a TTL has one), and knowing the agent's instance id would take the same request.
    An agent that does not answer (a bot that is not a nats.micro service, or a slow reply) gets
    the last answer of that name, else a bare provenance. Limits: with several instances of one
    name the first to answer is the one recorded.
    """

    def __init__(self, nc: NATS, ttl_s: float = 0.0) -> None:
        self.nc = nc
        # > 0: an answer younger than this is used without asking again (training sessions, whose
        # matches last a fraction of a second: the question per match was a tenth of a step's hops).
        self.ttl_s = ttl_s
        self._asked: dict[str, float] = {}
        self._last: dict[str, Provenance] = {}
        # Names whose last answer asked for compact turns (metadata `turns`; docs/protocol.md).
        self.compact: set[str] = set()

    def fresh(self, agent: str) -> Provenance | None:
        """The agent's answer while it is younger than `ttl_s`, else None."""
        if self.ttl_s > 0 and agent in self._last and time.monotonic() - self._asked[agent] < self.ttl_s:
            return self._last[agent]
        return None

    async def get(self, agent: str) -> Provenance:
        known = self.fresh(agent)
        if known is not None:
            return known
        try:
            msg = await self.nc.request(f"$SRV.INFO.{agent}", b"", timeout=1.0)
            info = json.loads(msg.data)
            meta = info.get("metadata") or {}
            prov = cap_provenance(
                Provenance(
                    agent=agent,
                    kind=meta.get("kind"),
                    version=meta.get("strategy_version") or info.get("version"),
                    models=[m for m in (meta.get("models") or "").split(",") if m],
                    config_hash=hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:12],
                    # The agent's options without where its LLM runs (referee/provenance.py).
                    options_hash=meta.get("options_hash"),
                )
            )
        except (nats.errors.Error, TimeoutError, ValueError, TypeError, AttributeError):
            # No answer: the last one of that name, or none (a hand-written bot plays without).
            return self._last.get(agent) or Provenance(agent=agent)
        self._last[agent] = prov
        self._asked[agent] = time.monotonic()
        if meta.get(TURN_FORM_KEY) == COMPACT:
            self.compact.add(agent)
        else:
            self.compact.discard(agent)
        return prov


class RefereeWorker:
    """Pulls match specs from the work queue and plays up to `concurrency` at once (`run`), each as a
    `MatchRunner` attempt; acks a spec once its `ended` record is stored, hands an aborted attempt
    back; registered as the `nats.micro` service `spielbus-referee` while it runs
    (referee/service.py). `stop()` drains (see the module docstring)."""

    def __init__(
        self,
        nc: NATS,
        *,
        subjects: Subjects | None = None,
        concurrency: int = 4,
        on_record: MatchObserver | None = None,
        on_event: Callable[[MatchEvent], Awaitable[None] | None] | None = None,
        absent_limit_s: float = DEFAULT_ABSENT_LIMIT_S,
        drain_grace_s: float = DRAIN_GRACE_S,
        provenance_ttl_s: float = 0.0,
        moved_events: bool = True,
        local_seats: Mapping[str, LocalSeat] | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, not {concurrency}")
        self.nc = nc
        self.subjects = subjects or Subjects()
        self.concurrency = concurrency
        self.on_record = on_record
        self.publisher = EventPublisher(nc, self.subjects)
        if on_event is not None:
            self.publisher.listeners.append(on_event)
        self.provenance = ProvenanceCache(nc, provenance_ttl_s)
        self.moved_events = moved_events
        # Agents answered in this process (a training environment's learner; referee/request.py).
        self.local_seats = dict(local_seats or {})
        self.presence = Presence(absent_limit_s)
        self.drain_grace_s = drain_grace_s
        self.in_flight = 0
        self.played = 0
        self.aborted = 0
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()
        self._streams_ready = False
        self.service: RefereeService | None = None  # registered while `run` runs

    async def play(
        self, spec: MatchSpec, attempt: int = 1, on_final: FinalRecord | None = None
    ) -> MatchRecord:
        """Play one spec and store its record, playing it again while a provider fault voids it (see
        the module docstring); raises `MatchAborted` if the attempt failed.

        `on_final` gets the final record as soon as its `ended` event's bytes are written, before
        JetStream acknowledges the store (a training environment hands its learner the episode's
        end without waiting for the stream). If that store then fails, `MatchAborted` is raised as
        ever, and the caller, who has been handed the record, must store it again rather than
        replay a match it has reported ended."""
        if spec.secret is None:
            # Drawn here, not per play: a voided match is replayed with the same secret.
            spec = spec.model_copy(update={"secret": secrets.token_hex(16)})
        voided: list[VoidedAttempt] = []
        wait = spec.policy.provider_wait_s
        while True:
            try:
                return await self._play_once(spec, attempt, voided, on_final)
            except MatchVoided as void:
                voided.append(void.voided)
                if len(voided) > spec.policy.provider_retries:
                    log.error(
                        "match %s voided %d times (last: %s): reported unplayed",
                        spec.match_id,
                        len(voided),
                        void,
                    )
                    return await self._unplayed(spec, attempt, void.record, voided, on_final)
                log.warning(
                    "match %s voided by a provider fault (%s): played again in %.0f s",
                    spec.match_id,
                    void,
                    wait,
                )
            await any_set([self._stop], wait)
            if self._stop.is_set():
                raise MatchAborted("the worker stopped while a voided match waited for its replay")
            wait = min(wait * 2, spec.policy.provider_wait_s * 256)

    async def _unplayed(
        self,
        spec: MatchSpec,
        attempt: int,
        record: MatchRecord,
        voided: list[VoidedAttempt],
        on_final: FinalRecord | None,
    ) -> MatchRecord:
        """Store the `ended` record of a match every play of which was voided (outcome `void`)."""
        record = record.model_copy(update={"voided": list(voided), "secret": spec.secret})
        event = MatchEvent.ended_of(record, attempt)
        try:
            await self._sink(on_final)(event)
        except Exception as exc:
            raise MatchAborted(f"the ended event was not stored: {exc!r}") from exc
        await self._observe(record)
        return record

    async def _observe(self, record: MatchRecord) -> None:
        self.played += 1
        if self.on_record is not None:
            res = self.on_record(record)
            if asyncio.iscoroutine(res):
                await res

    def _sink(self, on_final: FinalRecord | None) -> Callable[[MatchEvent], Awaitable[None]]:
        """The events' publisher, calling `on_final` between an `ended` event's encoding and its
        store: once its bytes are written, nothing done to the record handed out changes what is
        stored."""
        if on_final is None:
            return self.publisher

        async def publish(event: MatchEvent) -> None:
            sent, data = self.publisher.encode(event)
            if event.type == "ended" and event.record is not None:
                on_final(event.record)
            await self.publisher.send(sent, data)

        return publish

    async def _play_once(
        self, spec: MatchSpec, attempt: int, voided: list[VoidedAttempt], on_final: FinalRecord | None
    ) -> MatchRecord:
        if not self._streams_ready:
            await ensure_streams(self.nc.jetstream(), self.subjects)
            self._streams_ready = True
        agents = list(dict.fromkeys(spec.seats))
        known = [self.provenance.fresh(a) for a in agents]
        # All fresh (a training session's matches): no task per seat for `gather` to schedule.
        provenance = (
            [p for p in known if p is not None]
            if None not in known
            else list(await asyncio.gather(*(self.provenance.get(a) for a in agents)))
        )
        runner = MatchRunner(
            self.nc,
            spec,
            subjects=self.subjects,
            publish_event=self._sink(on_final),
            provenance=provenance,
            attempt=attempt,
            presence=self.presence,
            voided=voided,
            compact=frozenset(a for a in spec.seats if a in self.provenance.compact),
            moved_events=self.moved_events,
            local_seats=self.local_seats,
        )
        self.in_flight += 1
        try:
            with self.service.counting() if self.service is not None else contextlib.nullcontext():
                record = await runner.run()
        finally:
            self.in_flight -= 1
        await self._observe(record)
        return record

    async def _park(self, spec: MatchSpec, slots: asyncio.Semaphore) -> None:
        """Hold a spec whose agent is known absent (without its slot) until it is back or given up."""
        absent = self.presence.parked_by(spec.seats)
        if not absent:
            return
        log.info("match %s waits for absent %s", spec.match_id, ", ".join(absent))
        slots.release()
        try:
            while self.presence.parked_by(spec.seats) and not self._stop.is_set():
                await self.presence.until_change(spec.seats, self._stop)
        finally:
            await slots.acquire()

    async def _handle(self, msg: Msg, slots: asyncio.Semaphore) -> None:
        heartbeat: asyncio.Task[None] | None = None
        try:
            try:
                spec = MatchSpec.model_validate_json(msg.data)
            except ValidationError as exc:
                log.error("dropping malformed match spec: %s", exc.errors()[:1])
                await msg.term()
                return
            attempt = 1
            with contextlib.suppress(Exception):
                attempt = max(1, int(msg.metadata.num_delivered))
            if attempt > 1 and await self._already_ended(spec):
                # An earlier attempt's record is stored (its ack was lost): it stands, no replay.
                await msg.ack()
                return
            heartbeat = asyncio.create_task(self._keep_alive(msg))
            await self._park(spec, slots)
            if self._stop.is_set() and self.presence.parked_by(spec.seats):
                # Stopping while parked: hand the spec back untouched rather than start it now.
                await msg.nak()
                return
            try:
                await self.play(spec, attempt)
            except MatchAborted as exc:
                self.aborted += 1
                log.warning(
                    "match %s attempt %d aborted (%s): handed back to be replayed",
                    spec.match_id,
                    attempt,
                    exc,
                )
                # After a lost connection, wait for it to come back so the nak reaches the server;
                # otherwise the spec would sit out the whole ack_wait before its replay.
                await self._until_connected(ACK_WAIT_S)
                with contextlib.suppress(Exception):
                    await msg.nak(delay=1)
                return
            try:
                await msg.ack_sync(timeout=10)
            except Exception as exc:
                # The record is stored; a redelivery replays the match and its `ended` is deduplicated.
                # Expected when the bus goes away (no traceback: nothing is wrong with the code).
                log.warning(
                    "match %s: spec ack not confirmed (%s); the record is stored, a replay is deduplicated",
                    spec.match_id,
                    type(exc).__name__,
                )
        except asyncio.CancelledError:
            # Drain ran out of grace: hand the spec back at once for another worker.
            with contextlib.suppress(Exception):
                await msg.nak()
            raise
        except Exception:
            log.exception("referee worker: unexpected failure handling a spec")
            with contextlib.suppress(Exception):
                await msg.nak(delay=1)
        finally:
            if heartbeat is not None:
                heartbeat.cancel()
            slots.release()

    async def _already_ended(self, spec: MatchSpec) -> bool:
        """Whether the stream already holds this spec's record (False if unsure). An `ended` event
        that is not its record (referee/acceptance.py) does not count: a forgery stored on an open
        bus must not make the match be skipped."""
        try:
            stored = await self.nc.jetstream().get_last_msg(
                self.subjects.matches_stream, self.subjects.match(spec.match_id, "ended")
            )
            problem = record_problem(spec, MatchEvent.model_validate_json(stored.data or b""))
        except Exception:
            return False
        if problem is not None:
            log.warning(
                "match %s: the stored ended event is not its record (%s); replaying", spec.match_id, problem
            )
        return problem is None

    async def _until_connected(self, limit_s: float) -> None:
        """Until the connection is back (or closed for good), at most `limit_s` seconds."""
        loop = asyncio.get_running_loop()
        end = loop.time() + limit_s
        with conn_events.watch(self.nc) as changed:
            while not self.nc.is_connected and not self.nc.is_closed and loop.time() < end:
                changed.clear()
                await any_set([changed], end - loop.time())

    async def _keep_alive(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(ACK_WAIT_S / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def _take_slots(self, slots: asyncio.Semaphore) -> int:
        """Wait for one free slot, then take every other free one without waiting."""
        await slots.acquire()
        n = 1
        while n < self.concurrency and not slots.locked():
            await slots.acquire()
            n += 1
        return n

    async def _subscribe(self) -> JetStreamContext.PullSubscription:
        """The streams, then the schedule's durable consumer, each tried again while the bus is away:
        a server lost right after the worker connected used to end it with the consumer's timeout."""
        js = self.nc.jetstream()
        await ensure_streams(js, self.subjects)
        self._streams_ready = True
        config = ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_S, max_deliver=MAX_DELIVER)
        return await durable_pull(js, self.subjects.schedule, DURABLE, self.subjects.schedule_stream, config)

    async def run(self) -> None:
        """Pull and play until `stop()`; then drain (see the module docstring) and return."""
        # The streams and the consumer may take a while (the bus down, a cluster electing leaders):
        # stop() wins.
        ready = asyncio.ensure_future(self._subscribe())
        stop_early = asyncio.ensure_future(self._stop.wait())
        await asyncio.wait({ready, stop_early}, return_when=asyncio.FIRST_COMPLETED)
        stop_early.cancel()
        if not ready.done():
            ready.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await ready
            return
        sub = ready.result()
        slots = asyncio.Semaphore(self.concurrency)
        self.service = await RefereeService.start(self.nc, self.subjects, self.concurrency, self._live)
        stopping = asyncio.create_task(self._stop.wait())
        try:
            while not self._stop.is_set():
                taking = asyncio.create_task(self._take_slots(slots))
                await asyncio.wait({taking, stopping}, return_when=asyncio.FIRST_COMPLETED)
                if self._stop.is_set():
                    taking.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        n = await taking
                        for _ in range(n):
                            slots.release()
                    break
                n = taking.result()
                msgs: list[Msg] = []
                try:
                    msgs = await sub.fetch(n, timeout=0.5)
                except (nats.errors.TimeoutError, TimeoutError):
                    pass
                except nats.errors.ConnectionClosedError:
                    for _ in range(n):
                        slots.release()
                    break
                except _BUS_AWAY as exc:
                    # The server going away or JetStream not ready yet (its 503 while it stops or
                    # starts): expected, said in one line, pulled again once the bus is back.
                    log.warning("referee worker: fetch failed (%s); pulling again", type(exc).__name__)
                    await asyncio.sleep(0.5)
                except Exception:
                    # Anything else is not expected: keep its traceback for the log.
                    log.warning("referee worker: fetch failed", exc_info=True)
                    await asyncio.sleep(0.5)
                for _ in range(n - len(msgs)):
                    slots.release()
                for m in msgs:
                    task = asyncio.create_task(self._handle(m, slots))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        finally:
            stopping.cancel()
            await self._drain()
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            await self.service.stop()

    def _live(self) -> dict[str, int]:
        """The live numbers of `$SRV.STATS` (the matches endpoint's `data`)."""
        return {"in_flight": self.in_flight, "played": self.played, "aborted": self.aborted}

    async def _drain(self) -> None:
        if not self._tasks:
            return
        tasks = list(self._tasks)
        _, pending = await asyncio.wait(tasks, timeout=self.drain_grace_s)
        if pending:
            log.warning(
                "referee worker: %d matches still playing after %.0f s of grace: handing them back",
                len(pending),
                self.drain_grace_s,
            )
            for t in pending:
                t.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    def stop(self) -> None:
        self._stop.set()
