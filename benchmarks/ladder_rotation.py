"""How much of a ladder a bot that always times out gets by changing its options (issue 41).

A real nats-server, a referee worker, two random agents and a bot that never answers its turns
and re-announces its `$SRV.INFO` with a new `options_hash` every `--rotate-s` seconds (a new
`name@hash` entry each time). The ladder (no pace cap, rate 6000 a minute, concurrency 2, 300 ms
deadline, the default quarantine: 3 faulted matches, then 300 s) runs for `--seconds`; the
benchmark prints the share of scheduled matches that had the bot in a seat.

Run: .venv/bin/python benchmarks/ladder_rotation.py [--seconds 60] [--rotate-s 2]
Limits: one machine, three agents, tic-tac-toe; the share depends on the pool's size and the
referee's speed, so compare runs of one setup (the issue's 27% was a larger pool).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

from nats.micro import add_service
from nats.micro.service import ServiceConfig

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.protocol import GameSpec
from bus.server import EmbeddedNats
from referee.ladder.config import LadderAgent, LadderConfig
from referee.ladder.service import Ladder
from referee.worker import RefereeWorker
from tests.helpers import raw_responder, serving


async def run(url: str, seconds: float, rotate_s: float) -> tuple[int, int, int]:
    nc = await connect(url, name="ladder-rotation")
    cfg = LadderConfig.model_validate(
        {
            "name": "rotation",
            "games": [GameSpec(name="tic_tac_toe")],
            "agents": {n: LadderAgent() for n in ("g1", "g2", "bad")},
            "probe_s": 0.5,
            "concurrency": 2,
            "rate_per_minute": 6000.0,
            "deadline_ms": 300,
            "pace": {"per_pairing_per_hour": 0},
        }
    )
    worker = RefereeWorker(nc, concurrency=4, absent_limit_s=2.0)
    wt = asyncio.create_task(worker.run())

    async def silent(turn: object, msg: object) -> None:
        return None

    async def announce(i: int) -> object:
        meta = {"kind": "bad", "options_hash": str(i)}
        return await add_service(nc, ServiceConfig(name="bad", version="1.0.0", metadata=meta))

    rotations = 0
    async with (
        serving(nc, RandomStrategy.from_options({"seed": 1}), "g1"),
        serving(nc, RandomStrategy.from_options({"seed": 2}), "g2"),
        raw_responder(nc, "bad", silent),
    ):
        ladder = Ladder(nc, cfg)
        lt = asyncio.create_task(ladder.run())
        svc = await announce(0)
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            await asyncio.sleep(rotate_s)
            rotations += 1
            await svc.stop()  # type: ignore[attr-defined]
            svc = await announce(rotations)
        ladder.stop()
        await lt
        await svc.stop()  # type: ignore[attr-defined]
    worker.stop()
    await wt
    await nc.close()
    seats = [r.seats or [r.first, r.second] for r in ladder.results]
    seats += [list(p.entries.values()) for p in ladder.pending.values()]
    bad = sum(1 for s in seats if any(e.startswith("bad@") for e in s))
    return bad, len(seats), rotations


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--rotate-s", type=float, default=2.0)
    args = p.parse_args()
    with EmbeddedNats() as srv:
        bad, total, rotations = asyncio.run(run(srv.url, args.seconds, args.rotate_s))
    print(
        f"{args.seconds:.0f} s, options changed every {args.rotate_s:g} s ({rotations} times): "
        f"{bad} of {total} scheduled matches had the silent bot ({100 * bad / max(1, total):.0f}%)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
