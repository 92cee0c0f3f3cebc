"""Referee overhead against the raw NATS round trip, measured in one run, in alternating slices.

Three phases take turns in short slices (`--slice` seconds each, `--rounds` rounds), so every
ratio compares stretches of the same noisy minute:

(a) raw nats-py request/reply round trips per second, this process asking the child (a 600-byte
    payload, about a tic-tac-toe turn), one in flight;
(b) moves per second through the referee worker path (`RefereeWorker.play`: `MatchRunner`,
    provenance, `EventPublisher`, the `ended` record stored in JetStream) against agent
    services that answer instantly with the first legal action, 1 match at a time;
(c) the same with 32 matches at once.

Each ratio printed is the median over rounds of (b)/(a) and (c)/(a) of the same round.

CPU per move, measured apart: the referee side (the requester, the referee worker, their nats-py
read loops and flushers) runs in this process; the agent side (the two agent services and the
raw echo responder, with their connection) runs in a child process with its own event loop, as
deployed (no interpreter lock shared with the referee). Each side's `time.process_time()` is read
at the slice edges (the child answers a request on `bench.cpu` with its own), so referee-side and
agent-side CPU µs per move (per round trip in the raw phase) are counted apart. The nats-server is
a third process and is not counted; `benchmarks/pipeline.py` counts every process, submitter and
`spielbus referee` included.

    .venv/bin/python benchmarks/bus_overhead.py [--game connect_four] [--rounds 10] [--slice 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from agents.base import StrategyOptions
from agents.random_agent import FirstLegalStrategy
from agents.runtime import AgentService
from bus.connect import connect, flush
from bus.protocol import MatchEvent, MatchSpec
from bus.server import EmbeddedNats
from games.loader import parse_spec
from referee.worker import RefereeWorker

ECHO = "bench.echo"
PAYLOAD = b"x" * 600
Work = Callable[[float, list[int]], Awaitable[None]]


CPU_SUBJECT = "bench.cpu"


def _agents_main(url: str) -> None:
    """The agent process: two instant agents, the raw echo, and its own CPU clock on request."""
    asyncio.run(_serve_agents(url))


async def _serve_agents(url: str) -> None:
    nc = await connect(url, name="bench-agents")
    stop = asyncio.Event()

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    async def cpu(msg) -> None:  # type: ignore[no-untyped-def]
        if msg.data == b"stop":
            stop.set()
        await msg.respond(repr(time.process_time()).encode())

    await nc.subscribe(ECHO, cb=echo)
    await nc.subscribe(CPU_SUBJECT, cb=cpu)
    await serve_instant_agents(nc, stop)


async def serve_instant_agents(nc: NATS, stop: asyncio.Event) -> None:
    """The two instant agents (`first`) the matches are played between, until `stop`; then drain."""
    strategy = FirstLegalStrategy(StrategyOptions())
    services = [AgentService(nc, strategy, name=n, max_concurrency=64) for n in ("bench-a", "bench-b")]
    for svc in services:
        await svc.start()
    await flush(nc)
    await stop.wait()
    for svc in services:
        await svc.stop()
    await nc.drain()


class AgentProcess:
    """The agent side in its own process (as deployed): no shared interpreter lock with the referee."""

    def __init__(self, url: str, target: Callable[[str], None] | None = None) -> None:
        """`target(url)` serves the agent side (default: `_agents_main`); it must answer `bench.cpu`."""
        self.proc = multiprocessing.get_context("spawn").Process(
            target=target or _agents_main, args=(url,), daemon=True
        )
        self.nc: NATS | None = None

    async def start(self, nc: NATS) -> None:
        self.nc = nc
        self.proc.start()
        for _ in range(300):
            try:
                await self.cpu()
                return
            except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                await asyncio.sleep(0.1)
        raise RuntimeError("the agent process did not start")

    async def cpu(self, body: bytes = b"") -> float:
        """The agent process's CPU seconds so far (its own `time.process_time()`)."""
        assert self.nc is not None
        msg = await self.nc.request(CPU_SUBJECT, body, timeout=5)
        return float(msg.data)

    async def stop(self) -> None:
        await self.cpu(b"stop")
        await asyncio.get_running_loop().run_in_executor(None, self.proc.join, 30)


@dataclass
class Phase:
    name: str
    rates: list[float] = field(default_factory=list)
    ref_us: list[float] = field(default_factory=list)
    agent_us: list[float] = field(default_factory=list)


async def _slice(work: Work, agents: AgentProcess, seconds: float, phase: Phase) -> None:
    """One slice of a phase: `work(end, count)` runs until `end`, incrementing `count[0]` per unit
    (round trip or move); `count[1]` is the count at `end`. The rate counts what happened before
    `end`; CPU per unit divides the whole slice's CPU (matches still in flight finish after `end`)
    by every unit of the slice."""
    count = [0, 0]
    r0, a0, t0 = time.process_time(), await agents.cpu(), time.perf_counter()
    end = t0 + seconds
    loop = asyncio.get_running_loop()
    snap = loop.call_later(seconds, lambda: count.__setitem__(1, count[0]))
    await work(end, count)
    snap.cancel()
    if time.perf_counter() < end:  # finished early (cannot happen: each phase runs to `end`)
        count[1] = count[0]
    r1, a1 = time.process_time(), await agents.cpu()
    n = max(count[0], 1)
    phase.rates.append(count[1] / seconds)
    phase.ref_us.append((r1 - r0) / n * 1e6)
    phase.agent_us.append((a1 - a0) / n * 1e6)


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="connect_four")
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--slice", type=float, default=0.5, help="seconds per phase slice")
    args = p.parse_args()
    with EmbeddedNats() as srv:
        req = await connect(srv.url, name="bench-requester")
        agents = AgentProcess(srv.url)
        await agents.start(req)
        ref_nc = await connect(srv.url, name="bench-referee")
        worker = RefereeWorker(ref_nc, concurrency=32)
        game = parse_spec(args.game)
        counter = 0
        current: list[list[int]] = [[0, 0]]  # the running slice's counters

        async def count_moves(event: MatchEvent) -> None:
            if event.type == "moved" and event.move is not None and event.move.player >= 0:
                current[0][0] += 1

        worker.publisher.listeners.append(count_moves)

        async def raw(end: float, count: list[int]) -> None:
            while time.perf_counter() < end:
                await req.request(ECHO, PAYLOAD, timeout=5)
                count[0] += 1

        def matches(concurrent: int) -> Work:
            async def run(end: float, count: list[int]) -> None:
                nonlocal counter
                current[0] = count

                async def one_loop() -> None:
                    nonlocal counter
                    while time.perf_counter() < end:
                        counter += 1
                        spec = MatchSpec(
                            match_id=f"bench-{counter}", tournament="bench", game=game,
                            seats=["bench-a", "bench-b"], seed=counter, deadline_ms=10_000,
                        )  # fmt: skip
                        await worker.play(spec)

                await asyncio.gather(*(one_loop() for _ in range(concurrent)))

            return run

        # Warm up every path once (imports, caches, JetStream streams) before measuring.
        warm = Phase("warm")
        for work in (raw, matches(1), matches(32)):
            await _slice(work, agents, 0.3, warm)
        phases = [Phase("raw"), Phase("1 match"), Phase("32 matches")]
        works = [raw, matches(1), matches(32)]
        for _ in range(args.rounds):
            for work, phase in zip(works, phases, strict=True):
                await _slice(work, agents, args.slice, phase)
        await agents.stop()
        await req.drain()
        await ref_nc.drain()

    raw_p, one_p, many_p = phases
    # A round whose raw slice stalled completely (a loaded machine) has no ratio.
    one_ratio = statistics.median(o / r for o, r in zip(one_p.rates, raw_p.rates, strict=True) if r)
    many_ratio = statistics.median(m / r for m, r in zip(many_p.rates, raw_p.rates, strict=True) if r)
    med = statistics.median
    print(f"{args.rounds} rounds of {args.slice} s slices, game {args.game}; medians over rounds")
    print(f"{'phase':<12} {'per s':>9} {'ratio':>6} {'referee-side CPU µs':>20} {'agent-side CPU µs':>18}")
    for ph, ratio in ((raw_p, 1.0), (one_p, one_ratio), (many_p, many_ratio)):
        unit = "round trip" if ph is raw_p else "move"
        print(
            f"{ph.name:<12} {med(ph.rates):9.0f} {ratio:6.2f} {med(ph.ref_us):20.0f} {med(ph.agent_us):18.0f}"
            f"   (per {unit})"
        )
    print(f"single-match ratio {one_ratio:.2f} (aim: at least 0.77); 32-match ratio {many_ratio:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
