"""Helpers for tests that play through the real bus: serve a strategy in-process, play a match,
raw misbehaving responders for the fault tests, and a `spielbus` command as a child process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from agents.base import Strategy
from agents.runtime import AgentService
from bus.auth import AuthUser
from bus.connect import flush
from bus.process import die_with_parent
from bus.protocol import FaultPolicy, GameSpec, MatchEvent, MatchRecord, MatchSpec, Turn
from bus.subjects import Subjects
from games.loader import parse_spec
from referee.match import MatchRunner

ROOT = Path(__file__).resolve().parents[1]


def ended_event(rec: MatchRecord) -> MatchEvent:
    """The `ended` event the referee publishes for `rec`, for feeding views a finished match."""
    return MatchEvent(
        type="ended",
        match_id=rec.match_id,
        tournament=rec.tournament,
        game=rec.game,
        seats=rec.seats,
        record=rec,
    )


def uid(prefix: str = "t") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


@contextlib.asynccontextmanager
async def serving(nc: NATS, strategy: Strategy, name: str, **kw: Any) -> AsyncIterator[AgentService]:
    svc = AgentService(nc, strategy, name=name, **kw)
    await svc.start()
    try:
        yield svc
    finally:
        await svc.stop()


@contextlib.asynccontextmanager
async def raw_responder(
    nc: NATS, name: str, reply: Callable[[Turn, Msg], Awaitable[bytes | None]], queue: str | None = None
) -> AsyncIterator[list[Turn]]:
    """A hand-written bot: `reply` returns the raw bytes to answer with (None: stay silent)."""
    seen: list[Turn] = []

    async def cb(msg: Msg) -> None:
        turn = Turn.model_validate_json(msg.data)
        seen.append(turn)
        out = await reply(turn, msg)
        if out is not None:
            await msg.respond(out)

    sub = await nc.subscribe(Subjects().turn(name), queue=queue or name, cb=cb)
    await flush(nc)
    try:
        yield seen
    finally:
        await sub.unsubscribe()


def spec(
    game: str | GameSpec,
    seats: list[str],
    *,
    seed: int = 1,
    deadline_ms: int = 3000,
    policy: FaultPolicy | None = None,
    max_turns: int = 2000,
) -> MatchSpec:
    g = parse_spec(game) if isinstance(game, str) else game
    return MatchSpec(
        match_id=uid("m"),
        tournament="test",
        game=g,
        seats=seats,
        seed=seed,
        # Fixed per seed, so a test's chance outcomes are the same on every run (a real schedule
        # draws each match's secret at random; docs/referee.md).
        secret=f"test-secret-{seed}",
        deadline_ms=deadline_ms,
        policy=policy or FaultPolicy(),
        max_turns=max_turns,
    )


async def play(nc: NATS, match: MatchSpec, events: list[MatchEvent] | None = None) -> MatchRecord:
    async def sink(ev: MatchEvent) -> None:
        if events is not None:
            events.append(ev)

    return await MatchRunner(nc, match, publish_event=sink).run()


async def until(
    check: Callable[[], bool] | Callable[[], Awaitable[bool]], what: str, timeout_s: float = 60.0
) -> None:
    """Wait until `check()` holds (polled every 50 ms), or fail naming `what` after `timeout_s`.

    For a test that must know a state was reached (a spec acknowledged, a request refused)
    instead of sleeping a guess of how long that takes on a loaded machine."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout_s
    while True:
        got = check()
        if not isinstance(got, bool):
            got = await got
        if got:
            return
        if loop.time() > end:
            raise AssertionError(f"not reached within {timeout_s:g} s: {what}")
        await asyncio.sleep(0.05)


def spielbus_process(*args: str) -> subprocess.Popen[str]:
    """`spielbus ARGS` (this interpreter's `python -m spielbus.cli`) from the repository root, its
    output unbuffered so a test reads each line (stdout and stderr merged) as it is printed.

    The developer's NATS_URL is dropped (the test names its server), and the child dies with the
    test process (die_with_parent). The caller stops it (bus.process.stop_process)."""
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    env["PYTHONUNBUFFERED"] = "1"
    return subprocess.Popen(
        [sys.executable, "-m", "spielbus.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=die_with_parent,
    )


# The `user` of an AuthUser whose `password` is a creds file's path (a registered bot's login).
CREDS = "creds"


@contextlib.asynccontextmanager
async def quiet_logins(url: str) -> AsyncIterator[Callable[[AuthUser], Awaitable[NATS]]]:
    """Log in as any user of an auth folder (or a registered bot's creds, `CREDS`), each connection
    closed at the end. For attack tests: the server's refusals are expected and kept quiet; what
    counts is what got through."""
    opened: list[NATS] = []

    async def quiet(exc: Exception) -> None:
        pass

    async def make(user: AuthUser) -> NATS:
        login: dict[str, str] = (
            {"user_credentials": user.password}
            if user.user == CREDS
            else {"user": user.user, "password": user.password}
        )
        nc = await nats.connect(url, inbox_prefix=user.inbox_prefix() or "_INBOX", error_cb=quiet, **login)
        opened.append(nc)
        return nc

    try:
        yield make
    finally:
        for nc in opened:
            await nc.close()
