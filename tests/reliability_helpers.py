"""Helpers for the referee reliability tests: bots on a private subject prefix, tournaments of
hand-made specs played by real referee workers, and a nats-server that can be killed and
restarted on the same port with the same JetStream store (so the streams survive, as in a
real NATS restart)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from nats.js.errors import NotFoundError

from bus.connect import connect, flush
from bus.process import free_port
from bus.protocol import FaultPolicy, MatchEvent, MatchSpec, Move, Turn
from bus.server import find_binary
from bus.subjects import Subjects
from games.loader import parse_spec
from tests.helpers import uid

Reply = Callable[[Turn], Awaitable[bytes | None]]


def move_bytes(turn: Turn, **kw: Any) -> bytes:
    return Move(match_id=turn.match_id, turn=turn.turn, **kw).model_dump_json().encode()


async def first_legal(turn: Turn) -> bytes:
    return move_bytes(turn, action=turn.legal_actions[0].id)


@contextlib.asynccontextmanager
async def bot(
    nc: NATS, subjects: Subjects, name: str, reply: Reply = first_legal, raw: list[bytes] | None = None
) -> AsyncIterator[None]:
    """A hand-written bot on `subjects`' prefix; `raw` collects every request payload it receives."""

    tasks: set[asyncio.Task[None]] = set()

    async def answer(msg: Msg) -> None:
        out = await reply(Turn.model_validate_json(msg.data))
        if out is not None:
            with contextlib.suppress(Exception):
                await msg.respond(out)

    async def cb(msg: Msg) -> None:
        # One task per request, as the protocol asks of a bot: a slow turn must not hold the others.
        if raw is not None:
            raw.append(msg.data)
        task = asyncio.create_task(answer(msg))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    sub = await nc.subscribe(subjects.turn(name), queue=name, cb=cb)
    await flush(nc)
    try:
        yield
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()


@contextlib.contextmanager
def bot_in_thread(url: str, subjects: Subjects, name: str, reply: Reply = first_legal) -> Iterator[None]:
    """`bot` in another thread, on its own loop and connection: it answers while the test's own
    loop (the referee's) is blocked."""
    ready = threading.Event()
    stop = threading.Event()

    async def main() -> None:
        anc = await connect(url, name=f"{name}-thread")
        async with bot(anc, subjects, name, reply):
            ready.set()
            while not stop.is_set():  # noqa: ASYNC110 (a thread's flag)
                await asyncio.sleep(0.05)
        await anc.close()

    th = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    th.start()
    try:
        assert ready.wait(30), f"bot {name} did not start"
        yield
    finally:
        stop.set()
        th.join(10)


def make_specs(
    tid: str,
    game: str,
    pairs: list[list[str]],
    *,
    deadline_ms: int = 5000,
    policy: FaultPolicy | None = None,
) -> list[MatchSpec]:
    return [
        MatchSpec(
            match_id=f"{tid}-{i:05d}",
            tournament=tid,
            game=parse_spec(game),
            seats=seats,
            seed=i,
            deadline_ms=deadline_ms,
            policy=policy or FaultPolicy(),
            secret=secrets.token_hex(16),
        )
        for i, seats in enumerate(pairs)
    ]


async def queued(nc: NATS, subjects: Subjects, n: int) -> bool:
    """The schedule work queue holds exactly `n` specs (acknowledged ones leave it)."""
    try:
        info = await nc.jetstream().stream_info(subjects.schedule_stream)
    except NotFoundError:  # not created yet: nothing queued
        return n == 0
    return info.state.messages == n


async def stored_events(nc: NATS, subjects: Subjects, match_id: str, event: str = "*") -> list[MatchEvent]:
    """Every event of one match that the stream holds, in stream order."""
    js = nc.jetstream()
    subject = f"{subjects.prefix}.match.{match_id}.{event}"
    out: list[MatchEvent] = []
    done = asyncio.Event()

    async def cb(msg: Msg) -> None:
        out.append(MatchEvent.model_validate_json(msg.data))
        if msg.metadata.num_pending == 0:
            done.set()

    sub = await js.subscribe(
        subject,
        cb=cb,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.ALL,
        stream=subjects.matches_stream,
    )
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(done.wait(), 3)
    await sub.unsubscribe()
    return out


def new_prefix() -> Subjects:
    return Subjects(uid("p").replace("-", "_"))


class RestartableNats:
    """A real nats-server on a fixed port with a fixed JetStream store: `kill()` then `start()`
    is a NATS restart that keeps the streams (the embedded server's own store is temporary)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.store = tempfile.mkdtemp(prefix="spielbus-test-nats-")
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> RestartableNats:
        cmd = [find_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.store]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("nats-server did not start")

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        self.proc = None

    def close(self) -> None:
        self.kill()
        shutil.rmtree(self.store, ignore_errors=True)


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
