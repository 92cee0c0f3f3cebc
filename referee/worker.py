"""A referee worker: pulls match specs from `SPIELBUS_SCHEDULE` and plays them.

Any number of workers may pull from the same work queue, on any machine: that is
how refereeing scales. A spec is acknowledged only after its match has ended and
its `ended` event is stored, so a worker that dies mid-match leaves the spec to
be redelivered (after `ack_wait`) to another worker; collectors keep the first
record of each match id. A malformed spec is logged and terminated, never retried.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
from collections.abc import Awaitable, Callable

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig
from pydantic import ValidationError

from bus.protocol import MatchEvent, MatchRecord, MatchSpec, Provenance, trim_record
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee.match import MatchRunner

log = logging.getLogger(__name__)

ACK_WAIT_S = 30.0
DURABLE = "referee"

MatchObserver = Callable[[MatchRecord], Awaitable[None] | None]


class EventPublisher:
    """Publishes match events; `ended` goes through JetStream with an ack so the record is stored."""

    def __init__(self, nc: NATS, subjects: Subjects) -> None:
        self.nc = nc
        self.js = nc.jetstream()
        self.subjects = subjects
        self.listeners: list[Callable[[MatchEvent], Awaitable[None] | None]] = []

    async def __call__(self, event: MatchEvent) -> None:
        subject = self.subjects.match(event.match_id, event.type)
        data = event.model_dump_json(exclude_none=True).encode()
        limit = self.nc.max_payload - 4096  # room for headers and the event's envelope
        if len(data) > limit and event.record is not None:
            # An oversized record would be refused by the server and the match lost to its collector.
            event = event.model_copy(update={"record": trim_record(event.record, limit - 2048)})
            data = event.model_dump_json(exclude_none=True).encode()
        if event.type == "ended":
            await self.js.publish(subject, data, timeout=10)
        else:
            await self.nc.publish(subject, data)
        for listener in self.listeners:
            res = listener(event)
            if asyncio.iscoroutine(res):
                await res


class ProvenanceCache:
    """Agent kind, version and models from `$SRV.INFO.<name>`, asked once per agent name."""

    def __init__(self, nc: NATS) -> None:
        self.nc = nc
        self._cache: dict[str, Provenance] = {}

    async def get(self, agent: str) -> Provenance:
        if agent in self._cache:
            return self._cache[agent]
        prov = Provenance(agent=agent)
        try:
            msg = await self.nc.request(f"$SRV.INFO.{agent}", b"", timeout=1.0)
            info = json.loads(msg.data)
            meta = info.get("metadata") or {}
            prov = Provenance(
                agent=agent,
                kind=meta.get("kind"),
                version=meta.get("strategy_version") or info.get("version"),
                models=[m for m in (meta.get("models") or "").split(",") if m],
                config_hash=hashlib.sha256(json.dumps(meta, sort_keys=True).encode()).hexdigest()[:12],
            )
            self._cache[agent] = prov
        except (nats.errors.Error, TimeoutError, ValueError, TypeError, AttributeError):
            # Not a micro service (a hand-written bot): play on without provenance, ask again next match.
            pass
        return prov


class RefereeWorker:
    def __init__(
        self,
        nc: NATS,
        *,
        subjects: Subjects | None = None,
        concurrency: int = 4,
        on_record: MatchObserver | None = None,
        on_event: Callable[[MatchEvent], Awaitable[None] | None] | None = None,
    ) -> None:
        self.nc = nc
        self.subjects = subjects or Subjects()
        self.concurrency = concurrency
        self.on_record = on_record
        self.publisher = EventPublisher(nc, self.subjects)
        if on_event is not None:
            self.publisher.listeners.append(on_event)
        self.provenance = ProvenanceCache(nc)
        self.in_flight = 0
        self.played = 0
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task[None]] = set()

    async def play(self, spec: MatchSpec) -> MatchRecord:
        provenance = [await self.provenance.get(a) for a in dict.fromkeys(spec.seats)]
        runner = MatchRunner(
            self.nc, spec, subjects=self.subjects, publish_event=self.publisher, provenance=provenance
        )
        self.in_flight += 1
        try:
            record = await runner.run()
        finally:
            self.in_flight -= 1
        self.played += 1
        if self.on_record is not None:
            res = self.on_record(record)
            if asyncio.iscoroutine(res):
                await res
        return record

    async def _handle(self, msg: Msg, slots: asyncio.Semaphore) -> None:
        try:
            try:
                spec = MatchSpec.model_validate_json(msg.data)
            except ValidationError as exc:
                log.error("dropping malformed match spec: %s", exc.errors()[:1])
                await msg.term()
                return
            heartbeat = asyncio.create_task(self._keep_alive(msg))
            try:
                await self.play(spec)
            finally:
                heartbeat.cancel()
            await msg.ack()
        except Exception:
            log.exception("referee worker: unexpected failure handling a spec")
            with contextlib.suppress(Exception):
                await msg.nak(delay=1)
        finally:
            slots.release()

    async def _keep_alive(self, msg: Msg) -> None:
        while True:
            await asyncio.sleep(ACK_WAIT_S / 3)
            with contextlib.suppress(Exception):
                await msg.in_progress()

    async def run(self) -> None:
        """Pull and play until `stop()`; matches in flight finish before this returns."""
        js = self.nc.jetstream()
        await ensure_streams(js, self.subjects)
        sub = await js.pull_subscribe(
            self.subjects.schedule,
            durable=DURABLE,
            stream=self.subjects.schedule_stream,
            config=ConsumerConfig(ack_policy=AckPolicy.EXPLICIT, ack_wait=ACK_WAIT_S, max_deliver=5),
        )
        slots = asyncio.Semaphore(self.concurrency)
        try:
            while not self._stop.is_set():
                await slots.acquire()
                if self._stop.is_set():
                    slots.release()
                    break
                try:
                    msgs = await sub.fetch(1, timeout=0.5)
                except (nats.errors.TimeoutError, TimeoutError):
                    slots.release()
                    continue
                except nats.errors.ConnectionClosedError:
                    slots.release()
                    break
                except Exception:
                    # Reconnecting, or a transient JetStream error: wait and pull again.
                    slots.release()
                    log.warning("referee worker: fetch failed", exc_info=True)
                    await asyncio.sleep(0.5)
                    continue
                for i, m in enumerate(msgs):
                    if i > 0:
                        await slots.acquire()
                    task = asyncio.create_task(self._handle(m, slots))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        finally:
            if self._tasks:
                await asyncio.gather(*list(self._tasks), return_exceptions=True)
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    def stop(self) -> None:
        self._stop.set()
