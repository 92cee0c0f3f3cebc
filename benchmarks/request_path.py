"""nats-py's request path against the leanest request its public API allows, in one run.

Requester here, an echo responder in a child process (600-byte payload, one in flight).
`nc.request` (a new inbox token, `asyncio.wait_for` and the client's response map per request)
alternates with `publish(reply=...)` on one wildcard inbox subscription of our own, a future per
request and `call_later` for the timeout, in rounds; prints the medians of the requester's CPU µs
(`time.process_time`) and wall µs per request. Overrides nothing of nats-py.

    .venv/bin/python benchmarks/request_path.py [--rounds 5] [--requests 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable

from nats.aio.msg import Msg

from bus.connect import connect
from bus.server import EmbeddedNats

ECHO_CHILD = """
import asyncio, nats, sys
async def main():
    nc = await nats.connect(sys.argv[1])
    async def echo(msg):
        await msg.respond(msg.data)
    await nc.subscribe("bench.echo", cb=echo)
    await flush(nc)
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""
PAYLOAD = b"x" * 600


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=2000)
    args = p.parse_args()
    with EmbeddedNats(jetstream=False) as srv:
        child = subprocess.Popen(
            [sys.executable, "-c", ECHO_CHILD, srv.url], stdout=subprocess.PIPE, text=True
        )
        try:
            assert child.stdout is not None and "ready" in child.stdout.readline()
            results = asyncio.run(measure(srv.url, args.rounds, args.requests))
        finally:
            child.kill()
    for name, rows in results.items():
        cpu = statistics.median(c for c, _ in rows)
        wall = statistics.median(w for _, w in rows)
        print(f"{name:<16} requester CPU µs/request {cpu:6.0f}   wall µs/request {wall:6.0f}")


async def measure(url: str, rounds: int, requests: int) -> dict[str, list[tuple[float, float]]]:
    nc = await connect(url, name="bench-requester")
    loop = asyncio.get_running_loop()
    waiting: dict[str, asyncio.Future[Msg]] = {}

    async def on_reply(msg: Msg) -> None:
        fut = waiting.pop(msg.subject, None)
        if fut is not None and not fut.done():
            fut.set_result(msg)

    await nc.subscribe("bench.inbox.*", cb=on_reply)
    tokens = itertools.count()

    async def lean() -> Msg:
        reply = f"bench.inbox.{next(tokens)}"
        fut = waiting[reply] = loop.create_future()

        def expire() -> None:
            if not fut.done():
                fut.set_exception(TimeoutError())

        timer = loop.call_later(5, expire)
        await nc.publish("bench.echo", PAYLOAD, reply=reply)
        try:
            return await fut
        finally:
            timer.cancel()
            waiting.pop(reply, None)

    async def standard() -> Msg:
        return await nc.request("bench.echo", PAYLOAD, timeout=5)

    paths: dict[str, Callable[[], Awaitable[Msg]]] = {"nc.request": standard, "publish + inbox": lean}
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in paths}
    for fn in paths.values():
        for _ in range(200):
            await fn()
    for _ in range(rounds):
        for name, fn in paths.items():
            c0, t0 = time.process_time(), time.perf_counter()
            for _ in range(requests):
                await fn()
            results[name].append(
                ((time.process_time() - c0) / requests * 1e6, (time.perf_counter() - t0) / requests * 1e6)
            )
    await nc.drain()
    return results


if __name__ == "__main__":
    main()
