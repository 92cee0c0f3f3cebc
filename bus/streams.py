"""The two JetStream streams of protocol v1, created idempotently by whoever needs them first.

- `SPIELBUS_MATCHES` keeps the durable match events (`<prefix>.match.*.started`, `.forfeit`,
  `.ended`): the `ended` record is the durable truth of a match. `moved` events are plain
  publishes, not stored: one per step, they cost about a tenth of the referee pipeline's
  throughput when stored, and everything in them is in the `ended` record. The live page
  follows moves on a plain subscription (`observability.web.feed`). File storage, limits
  retention. A stream created by an older version (`<prefix>.match.>`) is left as it is and
  keeps storing `moved` too (`nats stream edit` narrows it).
- `SPIELBUS_SCHEDULE` is a work queue of match specs (`<prefix>.schedule`):
  each spec is delivered to one referee worker and removed when acknowledged.

Replication is a setting: `replicas` copies of each stream on as many servers of a NATS
cluster (1 to 5; 3 survives the loss of any one server). It comes from, in order: the
`replicas` argument, `set_stream_replicas()` (the `--stream-replicas` flag of `spielbus run`,
`submit` and `referee`), the environment variable `SPIELBUS_STREAM_REPLICAS`, else 1.
Whoever creates a stream sets its replication; a stream that already exists is left as it is
(the referee's account may not edit streams), with a warning when it differs from what was
asked. The work queue's consumers inherit the stream's replication.

A JetStream cluster that is still electing its leaders (just started, or a server lost)
answers "unavailable" or not at all for a few seconds: those answers are retried with
backoff for up to `wait_s` seconds before StreamError is raised. `publish_stored` does the
same for a publish that must be stored: it is sent again with the same `Nats-Msg-Id`, so a
copy the server stored before its ack was lost (a restart, a reconnect) is not stored twice.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from typing import TypeVar

import nats.errors
from nats.js import JetStreamContext
from nats.js.api import ConsumerConfig, PubAck, RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import APIError, NotFoundError, ServiceUnavailableError

from bus.subjects import Subjects

log = logging.getLogger(__name__)

REPLICAS_ENV = "SPIELBUS_STREAM_REPLICAS"
MAX_REPLICAS = 5  # JetStream's own limit
ENSURE_WAIT_S = 30.0

_replicas_setting: int | None = None
T = TypeVar("T")

# The match events the stream keeps; `moved` is live-only (see the module docstring).
DURABLE_EVENTS = ("started", "forfeit", "ended")


class StreamError(RuntimeError):
    """A stream that cannot be created or reached (message says which and why)."""


def check_replicas(value: object, source: str) -> int:
    """`value` as a replica count, or ValueError naming `source`."""
    try:
        n = int(str(value).strip())
    except ValueError:
        raise ValueError(
            f"{source}: replicas must be a whole number from 1 to {MAX_REPLICAS}, not {value!r}"
        ) from None
    if not 1 <= n <= MAX_REPLICAS:
        raise ValueError(f"{source}: replicas must be from 1 to {MAX_REPLICAS}, not {n}")
    return n


def replicas_arg(text: str) -> int:
    """argparse `type=` for `--stream-replicas`."""
    try:
        return check_replicas(text, "--stream-replicas")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--stream-replicas: ")) from exc


def set_stream_replicas(n: int | None) -> None:
    """The process-wide setting (the CLI flag); None falls back to the environment."""
    global _replicas_setting
    _replicas_setting = None if n is None else check_replicas(n, "stream replicas")


def stream_replicas() -> int:
    """The replica count to create streams with: the flag's, else `$SPIELBUS_STREAM_REPLICAS`, else 1."""
    if _replicas_setting is not None:
        return _replicas_setting
    env = os.environ.get(REPLICAS_ENV, "").strip()
    if not env:
        return 1
    try:
        return check_replicas(env, REPLICAS_ENV)
    except ValueError as exc:
        raise StreamError(str(exc)) from exc


_TRANSIENT = (ServiceUnavailableError, nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError)


async def _retrying(call: Callable[[], Awaitable[T]], wait_s: float, hint: str, give_up: str) -> T:
    """`call()` again with backoff while JetStream is away or does not answer, for up to `wait_s`
    seconds; then StreamError: `give_up`, the wait, the last exception's name, then `hint`."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait_s
    pause = 0.25
    while True:
        try:
            return await call()
        except _TRANSIENT as exc:
            if loop.time() + pause > deadline:
                raise StreamError(f"{give_up} within {wait_s:.0f} s ({type(exc).__name__}){hint}") from exc
            log.info("JetStream did not answer (%s); trying again", type(exc).__name__)
            await asyncio.sleep(pause)
            pause = min(pause * 2, 2.0)


async def _ensure(js: JetStreamContext, config: StreamConfig, wait_s: float) -> None:
    await _retrying(
        lambda: _ensure_once(js, config),
        wait_s,
        ": is JetStream on, may this user create and read the streams, and does the cluster have a quorum?",
        f"JetStream did not answer for stream {config.name or ''}",
    )


async def durable_pull(
    js: JetStreamContext,
    subject: str,
    durable: str,
    stream: str,
    config: ConsumerConfig,
    wait_s: float = ENSURE_WAIT_S,
) -> JetStreamContext.PullSubscription:
    """A durable pull consumer, created or bound, tried again like the streams while JetStream is
    away or does not answer, for up to `wait_s` seconds; then StreamError. A failed try subscribes
    nothing (nats.py asks for the consumer before it subscribes)."""
    return await _retrying(
        lambda: js.pull_subscribe(subject, durable=durable, stream=stream, config=config),
        wait_s,
        ": is JetStream on, and may this user create and read the consumer?",
        f"JetStream did not answer for consumer {durable} of stream {stream}",
    )


PUBLISH_WAIT_S = 90.0  # under JetStream's default two-minute duplicate window


async def publish_stored(
    js: JetStreamContext,
    subject: str,
    data: bytes,
    msg_id: str,
    *,
    wait_s: float = PUBLISH_WAIT_S,
    attempt_timeout_s: float = 10.0,
) -> PubAck:
    """Publish to a stream and wait for its ack, sending again (same `msg_id`) while the bus is
    away or JetStream does not answer, for up to `wait_s` seconds; then StreamError."""
    return await _retrying(
        lambda: js.publish(subject, data, timeout=attempt_timeout_s, headers={"Nats-Msg-Id": msg_id}),
        wait_s,
        ": is the bus up, with JetStream on?",
        f"JetStream stored no copy of {msg_id} on {subject}",
    )


async def _ensure_once(js: JetStreamContext, config: StreamConfig) -> None:
    name = config.name or ""
    try:
        info = await js.stream_info(name)
        have = info.config.num_replicas or 1
        if have != config.num_replicas:
            log.warning(
                "stream %s has %d replicas, not the %d asked for; it is kept as it is "
                "(change it with `nats stream edit %s --replicas %d`)",
                name,
                have,
                config.num_replicas,
                name,
                config.num_replicas,
            )
        return
    except NotFoundError:
        pass
    try:
        await js.add_stream(config)
        log.info("created stream %s with %d replicas", name, config.num_replicas)
    except ServiceUnavailableError:
        raise
    except APIError as exc:
        # Another process created it between our look and our add.
        if "already in use" in str(exc):
            return
        if (config.num_replicas or 1) > 1 and "replica" in str(exc).lower():
            raise StreamError(
                f"cannot create stream {name} with {config.num_replicas} replicas: {exc.description}; "
                "replicas above 1 need a NATS cluster with JetStream on at least that many servers"
            ) from exc
        raise StreamError(f"cannot create stream {name}: {exc.description}") from exc


async def ensure_streams(
    js: JetStreamContext, subjects: Subjects, *, replicas: int | None = None, wait_s: float = ENSURE_WAIT_S
) -> None:
    n = check_replicas(replicas, "replicas") if replicas is not None else stream_replicas()
    await _ensure(
        js,
        StreamConfig(
            name=subjects.matches_stream,
            subjects=[subjects.match_all(e) for e in DURABLE_EVENTS],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=7 * 24 * 3600,
            num_replicas=n,
        ),
        wait_s,
    )
    await _ensure(
        js,
        StreamConfig(
            name=subjects.schedule_stream,
            subjects=[subjects.schedule],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
            num_replicas=n,
        ),
        wait_s,
    )
