"""Joining the ladder from outside, under NATS accounts (real nats-server with `spielbus auth init`'s
config): the Python example bot started as its author would, with its one login file, joins the
pool and plays rated matches; an impostor serving under another listed name with its own login
is never heard, so that name never joins, plays or appears on the leaderboard."""

from __future__ import annotations

import asyncio
from pathlib import Path

from agents.random_agent import RandomStrategy
from bus.auth import load_auth
from bus.connect import connect
from bus.protocol import GameSpec
from bus.server import EmbeddedNats
from referee.ladder.config import LadderAgent, LadderConfig
from referee.ladder.service import Ladder
from referee.worker import RefereeWorker
from tests.example_bots import running_bot
from tests.helpers import serving, uid, until

# `alice` is a built-in agent, `pybot` the outside bot, `carol` a listed name nobody logs in as;
# `mallory` has a login but is not in the ladder and serves as `carol` (tests/conftest.py's auth_dir).
AUTH_AGENTS = ["alice", "pybot", "carol", "mallory"]


async def test_outside_bot_joins_and_impostor_is_refused(auth_server: EmbeddedNats, auth_dir: Path) -> None:
    bundle = load_auth(auth_dir)
    r, alice, mallory = bundle.referee(), bundle.agent("alice"), bundle.agent("mallory")
    ref = await connect(auth_server.url, name="ladder", user=r.user, password=r.password)
    a_nc = await connect(auth_server.url, name="alice", user=alice.user, password=alice.password)
    m_nc = await connect(auth_server.url, name="mallory", user=mallory.user, password=mallory.password)
    cfg = LadderConfig(
        name=uid("lb"),
        games=[GameSpec(name="tic_tac_toe")],
        agents={n: LadderAgent() for n in ("alice", "pybot", "carol")},
        probe_s=0.5,
        concurrency=2,
        deadline_ms=5000,
        # The default bucket: the one the referee account may use (bus/auth.py).
    )
    worker = RefereeWorker(ref, concurrency=2, absent_limit_s=2.0)
    wt = asyncio.create_task(worker.run())
    ladder = Ladder(ref, cfg)
    lt = asyncio.create_task(ladder.run())
    try:
        async with (
            serving(a_nc, RandomStrategy.from_options({"seed": 1}), "alice"),
            serving(m_nc, RandomStrategy.from_options({"seed": 2}), "carol"),  # the impostor
            running_bot(
                "python", "pybot", auth_server.url, ref, "--login", str(auth_dir / "agents" / "pybot.env")
            ),
        ):

            def pybot_rated() -> bool:
                return (
                    sum(
                        1
                        for x in ladder.results
                        if x.first.startswith("pybot@") or x.second.startswith("pybot@")
                    )
                    >= 2
                )

            await until(pybot_rated, "the outside bot played two rated matches", 180)
            assert "carol" not in ladder.pool.members
            assert set(ladder.pool.members) == {"alice", "pybot"}
            players = {e.split("@")[0] for x in ladder.results for e in (x.first, x.second)}
            assert players == {"alice", "pybot"}
            await until(lambda: len(ladder.rows) == 2, "both entries rated", 60)
            assert {row["name"] for row in ladder.leaderboard()["rows"]} == {"alice", "pybot"}
    finally:
        ladder.stop()
        await asyncio.wait_for(lt, 60)
        worker.stop()
        await asyncio.wait_for(wt, 60)
        for nc in (ref, a_nc, m_nc):
            await nc.close()
