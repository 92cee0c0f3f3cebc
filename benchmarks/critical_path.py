"""Where one move's time goes at one match: the critical path, stamped, against a raw round trip.

At one match nothing overlaps: a move is the referee's work from a reply to the next turn's
publish, then the turn's trip to the agent and back, which holds the agent's work from reading
the turn to publishing its move. This script stamps those instants (`time.perf_counter`, each
process its own clock, only differences within a process are used) and prints the medians:

- referee: reply read -> next turn handed to nats-py (check, legality, record, history, the
  next turn's bytes);
- referee: turn handed to nats-py -> reply read (everything outside the referee);
- agent, inside the latter: request read off the connection (`ConcurrentEndpoint._spawn`) ->
  its task started (`_on_turn_request`) -> turn validated -> strategy called -> strategy done ->
  move handed to nats-py (`Request.respond`);
- raw nats-py request/reply of the same payload size between the same two processes.

The stamps come from wrappers installed by this script around those functions (product code
is unchanged); each wrapper costs well under a microsecond. Connect four between two instant
agents (`first`), the worker path as in `benchmarks/bus_overhead.py`.

    .venv/bin/python benchmarks/critical_path.py [--game connect_four] [--matches 200]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

from bus_overhead import (  # this folder is on sys.path when run
    CPU_SUBJECT,
    AgentProcess,
    serve_instant_agents,
)
from nats.aio.msg import Msg
from nats.micro.request import Request

from agents.random_agent import FirstLegalStrategy
from agents.runtime import AgentService
from bus.connect import connect
from bus.micro import ConcurrentEndpoint
from bus.protocol import MatchSpec, Turn
from bus.server import EmbeddedNats
from games.loader import parse_spec
from referee.worker import RefereeWorker

ECHO = "bench.echo"
CONTROL = "bench.stamps"
STAMPS: list[tuple[str, float]] = []
AGENT_STEPS = ("read", "task", "valid", "decide", "decided", "respond")


def _stamp(name: str) -> None:
    STAMPS.append((name, time.perf_counter()))


def _wrap_async(owner: Any, attr: str, before: str | None, after: str | None) -> None:
    fn = getattr(owner, attr)

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        if before:
            _stamp(before)
        out = await fn(*args, **kwargs)
        if after:
            _stamp(after)
        return out

    setattr(owner, attr, wrapper)


def _instrument_agent() -> None:
    _wrap_async(ConcurrentEndpoint, "_spawn", "read", None)
    _wrap_async(AgentService, "_on_turn_request", "task", None)
    _wrap_async(FirstLegalStrategy, "decide", "decide", "decided")
    _wrap_async(Request, "respond", "respond", None)
    validate = Turn.model_validate_json

    def checked(data: Any, *args: Any, **kwargs: Any) -> Turn:
        out = validate(data, *args, **kwargs)
        _stamp("valid")
        return out

    # A stamping stand-in for the classmethod, in this benchmark's agent process only.
    Turn.model_validate_json = checked  # type: ignore[assignment]


def gaps(stamps: list[tuple[str, float]], first: str, second: str) -> list[float]:
    """µs from each `first` stamp to the `second` stamp right after it."""
    return [(b[1] - a[1]) * 1e6 for a, b in itertools.pairwise(stamps) if a[0] == first and b[0] == second]


def _agents_main(url: str) -> None:
    asyncio.run(_serve_agents(url))


async def _serve_agents(url: str) -> None:
    _instrument_agent()
    nc = await connect(url, name="bench-agents")
    stop = asyncio.Event()

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    async def cpu(msg: Msg) -> None:  # what `AgentProcess` asks: alive, and stop
        if msg.data == b"stop":
            stop.set()
        await msg.respond(repr(time.process_time()).encode())

    async def control(msg: Msg) -> None:
        if msg.data == b"clear":
            STAMPS.clear()
        steps = itertools.pairwise(AGENT_STEPS)
        report = ";".join(f"{statistics.median(gaps(STAMPS, a, b) or [0.0]):.1f}" for a, b in steps)
        await msg.respond(report.encode())

    await nc.subscribe(ECHO, cb=echo)
    await nc.subscribe(CONTROL, cb=control)
    await nc.subscribe(CPU_SUBJECT, cb=cpu)
    await serve_instant_agents(nc, stop)


def _instrument_referee(nc: Any) -> None:
    request: Callable[..., Any] = nc.request

    async def stamped(*args: Any, **kwargs: Any) -> Msg:
        _stamp("send")
        msg = await request(*args, **kwargs)
        _stamp("reply")
        return msg

    nc.request = stamped


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="connect_four")
    p.add_argument("--matches", type=int, default=200, help="matches measured (after 50 to warm up)")
    args = p.parse_args()
    with EmbeddedNats() as srv:
        req = await connect(srv.url, name="bench-requester")
        agents = AgentProcess(srv.url, _agents_main)
        await agents.start(req)
        ref_nc = await connect(srv.url, name="bench-referee")
        _instrument_referee(ref_nc)
        worker = RefereeWorker(ref_nc, concurrency=1)
        game = parse_spec(args.game)
        sizes: list[int] = []
        for i in range(50 + args.matches):
            if i == 50:
                STAMPS.clear()
                await req.request(CONTROL, b"clear", timeout=5)
            spec = MatchSpec(
                match_id=f"cp-{i}", tournament="bench", game=game,
                seats=["bench-a", "bench-b"], seed=i, deadline_ms=10_000,
            )  # fmt: skip
            record = await worker.play(spec)
            sizes.append(len(record.moves))
        referee_work = gaps(STAMPS, "reply", "send")
        outside = gaps(STAMPS, "send", "reply")
        agent = [float(x) for x in (await req.request(CONTROL, b"", timeout=5)).data.split(b";")]
        payload = b"x" * 1000  # about a connect-four turn mid-game
        raw = []
        for _ in range(3000):
            t0 = time.perf_counter()
            await req.request(ECHO, payload, timeout=5)
            raw.append((time.perf_counter() - t0) * 1e6)
        await agents.stop()
        await req.drain()
        await ref_nc.drain()

    med = statistics.median
    agent_total = sum(agent)
    print(f"{args.game}, {args.matches} matches (median {med(sizes):.0f} moves), 1 at a time; medians, µs")
    print(f"referee: reply read -> next turn handed to nats-py   {med(referee_work):7.1f}")
    print(f"referee: turn handed to nats-py -> reply read        {med(outside):7.1f}")
    for (a, b), us in zip(itertools.pairwise(AGENT_STEPS), agent, strict=True):
        print(f"   agent: {a} -> {b:<36} {us:7.1f}")
    print(f"   agent: read -> move handed to nats-py (sum)       {agent_total:7.1f}")
    print(f"   outside both sides' work                        {med(outside) - agent_total:7.1f}")
    print(f"raw request/reply, same processes, 1000 bytes        {med(raw):7.1f}")
    move = med(referee_work) + med(outside)
    ratio = med(raw) / move
    print(f"a move (referee work + outside)                      {move:7.1f}   ratio raw/move {ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
