"""Referee overhead against the raw NATS round trip, measured in one run.

(a) raw nats-py request/reply round trips per second between two connections;
(b) moves per second through the referee (`MatchRunner`) against an agent service
    that answers instantly with the first legal action, for 1 match at a time and
    for 32 concurrent matches.

Prints (b)/(a). Per move the referee does what the raw round trip does not: build
the seat's view, serialize and validate the messages, check legality, record,
publish the event. Everything runs in this one process on one embedded nats-server.

    .venv/bin/python benchmarks/bus_overhead.py [--game connect_four] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import time

from nats.aio.msg import Msg

from agents.base import StrategyOptions
from agents.random_agent import FirstLegalStrategy
from agents.runtime import AgentService
from bus.connect import connect
from bus.protocol import MatchEvent, MatchSpec
from bus.server import EmbeddedNats
from games.loader import parse_spec
from referee.match import MatchRunner


async def raw_round_trips(url: str, seconds: float) -> float:
    a = await connect(url, name="bench-responder")
    b = await connect(url, name="bench-requester")

    async def echo(msg: Msg) -> None:
        await msg.respond(msg.data)

    await a.subscribe("bench.echo", cb=echo)
    await a.flush()
    payload = b"x" * 600  # about the size of a tic-tac-toe turn
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        await b.request("bench.echo", payload, timeout=5)
        n += 1
    rate = n / (time.perf_counter() - t0)
    await a.drain()
    await b.drain()
    return rate


async def referee_moves(url: str, game: str, concurrent: int, seconds: float) -> float:
    agent_nc = await connect(url, name="bench-agent")
    ref_nc = await connect(url, name="bench-referee")
    svc_a = AgentService(agent_nc, FirstLegalStrategy(StrategyOptions()), name="bench-a", max_concurrency=64)
    svc_b = AgentService(agent_nc, FirstLegalStrategy(StrategyOptions()), name="bench-b", max_concurrency=64)
    await svc_a.start()
    await svc_b.start()

    async def sink(event: MatchEvent) -> None:
        # What the worker does with every event: serialize and publish it.
        await ref_nc.publish(f"bench.match.{event.type}", event.model_dump_json(exclude_none=True).encode())

    moves = 0
    counter = 0
    t0 = time.perf_counter()

    async def loop() -> None:
        nonlocal moves, counter
        while time.perf_counter() - t0 < seconds:
            counter += 1
            spec = MatchSpec(
                match_id=f"bench-{counter}", tournament="bench", game=parse_spec(game),
                seats=["bench-a", "bench-b"], seed=counter, deadline_ms=10_000,
            )  # fmt: skip
            rec = await MatchRunner(ref_nc, spec, publish_event=sink).run()
            moves += sum(1 for m in rec.moves if m.player >= 0)

    await asyncio.gather(*(loop() for _ in range(concurrent)))
    rate = moves / (time.perf_counter() - t0)
    await svc_a.stop()
    await svc_b.stop()
    await agent_nc.drain()
    await ref_nc.drain()
    return rate


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--game", default="connect_four")
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    with EmbeddedNats(jetstream=False) as srv:
        raw = await raw_round_trips(srv.url, args.seconds)
        one = await referee_moves(srv.url, args.game, 1, args.seconds)
        many = await referee_moves(srv.url, args.game, 32, args.seconds)
    print(f"(a) raw request/reply:            {raw:9.0f} round trips/s")
    print(f"(b) referee, 1 match:             {one:9.0f} moves/s   ratio (b)/(a) = {one / raw:.2f}")
    print(f"(b) referee, 32 concurrent:       {many:9.0f} moves/s   ratio (b)/(a) = {many / raw:.2f}")
    overhead = raw / one - 1
    print(f"referee overhead per move, single match: {overhead:.0%} of a raw round trip (aim: under 30%)")


if __name__ == "__main__":
    asyncio.run(main())
