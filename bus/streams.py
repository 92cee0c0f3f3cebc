"""The two JetStream streams of protocol v1, created idempotently by whoever needs them first.

- `SPIELBUS_MATCHES` keeps every match event (`<prefix>.match.>`): the durable
  record and the spectators' feed. File storage, limits retention.
- `SPIELBUS_SCHEDULE` is a work queue of match specs (`<prefix>.schedule`):
  each spec is delivered to one referee worker and removed when acknowledged.
"""

from __future__ import annotations

from nats.js import JetStreamContext
from nats.js.api import RetentionPolicy, StorageType, StreamConfig
from nats.js.errors import BadRequestError, NotFoundError

from bus.subjects import Subjects


async def _ensure(js: JetStreamContext, config: StreamConfig) -> None:
    try:
        await js.stream_info(config.name or "")
        return
    except NotFoundError:
        pass
    try:
        await js.add_stream(config)
    except BadRequestError as exc:
        # Another process created it between our look and our add.
        if "already in use" not in str(exc):
            raise


async def ensure_streams(js: JetStreamContext, subjects: Subjects) -> None:
    await _ensure(
        js,
        StreamConfig(
            name=subjects.matches_stream,
            subjects=[f"{subjects.prefix}.match.>"],
            retention=RetentionPolicy.LIMITS,
            storage=StorageType.FILE,
            max_age=7 * 24 * 3600,
        ),
    )
    await _ensure(
        js,
        StreamConfig(
            name=subjects.schedule_stream,
            subjects=[subjects.schedule],
            retention=RetentionPolicy.WORK_QUEUE,
            storage=StorageType.FILE,
        ),
    )
