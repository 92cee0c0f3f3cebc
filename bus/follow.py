"""Following a JetStream stream read-only: what a spectator account can do.

`follow_stream` delivers every stored message of `stream` that matches `subject`, in
stream order, then each new one as it is stored, using nothing but read requests
(`$JS.API.STREAM.MSG.GET.<stream>` with `next_by_subj`) and a plain subscription to
`subject` as a doorbell. It creates no consumer, so it works for the spectator user of
`spielbus auth init`, which may not create consumers (a consumer's delivery subject is
chosen by its creator, in the request body, where subject permissions cannot see it).
`api_prefix`: where the JetStream API is reached; a reader's account imports the read
requests under `bus.auth.spectator_api(subjects)`, not `$JS.API`. `reads`: the connection the
reads go through, when it is not `nc`: under `spielbus auth init`'s accounts the doorbell is the
`spectator` login's (it hears the events and asks nothing) and the reads the `replay` login's
(it asks and hears only its inbox), see bus/auth.py.

Limits: one request per message, so it suits watchers, not bulk export (a referee
account can use an ordered consumer instead); a doorbell missed in the race between a
publish and its storage is covered by polling every `poll` seconds; messages removed
from the stream (by age or limits) before they are read are skipped, not reported.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from nats.aio.client import Client as NATS
from nats.aio.subscription import Subscription
from nats.js import JetStreamContext
from nats.js.api import RawStreamMsg
from nats.js.errors import NotFoundError

log = logging.getLogger(__name__)

StoredCallback = Callable[[RawStreamMsg], Awaitable[None]]


class StreamFollower:
    def __init__(
        self,
        nc: NATS,
        stream: str,
        subject: str,
        cb: StoredCallback,
        *,
        poll: float,
        api_prefix: str | None,
        reads: NATS | None = None,
    ) -> None:
        self.nc = nc
        self.reads = reads or nc
        self.api_prefix = api_prefix
        self.stream = stream
        self.subject = subject
        self.cb = cb
        self.poll = poll
        self.next_seq = 1
        self.delivered = 0
        self._bell = asyncio.Event()
        self._sub: Subscription | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self, *, new_only: bool = False) -> None:
        js = self._js()
        if new_only:
            info = await js.stream_info(self.stream)
            self.next_seq = info.state.last_seq + 1

        async def ring(_msg: object) -> None:
            self._bell.set()

        self._sub = await self.nc.subscribe(self.subject, cb=ring)
        self._task = asyncio.create_task(self._run())

    def _js(self) -> JetStreamContext:
        return self.reads.jetstream(prefix=self.api_prefix) if self.api_prefix else self.reads.jetstream()

    async def _run(self) -> None:
        js = self._js()
        while True:
            self._bell.clear()  # before the read: a message stored after it rings again
            try:
                msg = await js.get_msg(self.stream, seq=self.next_seq, subject=self.subject, next=True)
            except NotFoundError:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._bell.wait(), timeout=self.poll)
                continue
            except Exception:  # a lost connection or a slow server: try again until closed
                if self.reads.is_closed:
                    return
                await asyncio.sleep(self.poll)
                continue
            self.next_seq = (msg.seq or self.next_seq) + 1
            self.delivered += 1
            try:
                await self.cb(msg)
            except Exception:  # one bad message must not stop the follower
                log.warning("follower of %s: callback failed at seq %s", self.stream, msg.seq, exc_info=True)

    async def unsubscribe(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None


async def follow_stream(
    nc: NATS,
    stream: str,
    subject: str,
    cb: StoredCallback,
    *,
    new_only: bool = False,
    poll: float = 0.25,
    api_prefix: str | None = None,
    reads: NATS | None = None,
) -> StreamFollower:
    """Start following; `unsubscribe()` the result to stop. `cb` gets messages in stream order."""
    follower = StreamFollower(nc, stream, subject, cb, poll=poll, api_prefix=api_prefix, reads=reads)
    await follower.start(new_only=new_only)
    return follower
