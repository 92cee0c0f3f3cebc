"""The ladder service (referee/ladder/service.py) against a real nats-server and a real referee
worker: agents join and leave mid-run, a stopped ladder's pending matches are counted by the next
one exactly once, the rate limit and concurrency hold, and a faulting entry is benched with its
reason on the leaderboard, and stays benched across a restart of the ladder."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, cast

from nats.aio.client import Client as NATS
from nats.micro import add_service
from nats.micro.service import ServiceConfig

from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.process import die_with_parent, free_port, stop_process
from bus.protocol import GameSpec
from bus.server import find_binary
from referee.ladder.config import LadderAgent, LadderConfig, QuarantineConfig, parse_ladder
from referee.ladder.service import Ladder
from referee.ladder.store import LadderStore
from referee.worker import RefereeWorker
from tests.helpers import raw_responder, serving, uid, until
from tests.test_ladder_store import _listening


def _config(agents: list[str], **kw: object) -> LadderConfig:
    return LadderConfig.model_validate(
        {
            "name": uid("lad"),
            "games": [GameSpec(name="tic_tac_toe")],
            "agents": {a: LadderAgent() for a in agents},
            "probe_s": 0.3,
            "concurrency": 2,
            "rate_per_minute": 6000.0,
            "deadline_ms": 3000,
            "bucket": uid("LADDER").replace("-", "_"),
            **kw,
        }
    )


@contextlib.asynccontextmanager
async def running(nc: NATS, ladder: Ladder) -> AsyncIterator[Ladder]:
    task = asyncio.create_task(ladder.run())
    try:
        await until(lambda: ladder.ready.is_set() or task.done(), "the ladder started")
        yield ladder
    finally:
        ladder.stop()
        await asyncio.wait_for(task, 60)


@contextlib.asynccontextmanager
async def referee(nc: NATS) -> AsyncIterator[RefereeWorker]:
    # An agent that left mid-match is forfeited after 2 s, not the default minute.
    worker = RefereeWorker(nc, concurrency=4, drain_grace_s=30, absent_limit_s=2.0)
    task = asyncio.create_task(worker.run())
    try:
        yield worker
    finally:
        worker.stop()
        await asyncio.wait_for(task, 60)


async def _garbage(turn: object, msg: object) -> bytes:
    """A hand-written bot's answer to every turn: not even JSON (a `malformed` fault)."""
    return b"{not json"


def _rows(ladder: Ladder) -> list[dict[str, Any]]:
    return list(ladder.leaderboard()["rows"])


def _names(ladder: Ladder) -> set[str]:
    return {e.split("@")[0] for r in ladder.results for e in (r.seats or [r.first, r.second])}


async def test_join_leave_and_restart_count_once(nats_url: str) -> None:
    a, b, c = uid("la"), uid("lb"), uid("lc")
    cfg = _config([a, b, c])
    nc = await connect(nats_url, name="ladder-test")
    try:
        async with referee(nc), serving(nc, RandomStrategy.from_options({"seed": 1}), a):
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), b):
                async with running(nc, Ladder(nc, cfg)) as ladder:
                    await until(lambda: len(ladder.results) >= 3, "three results", 120)
                    assert _names(ladder) == {a, b}  # c is not on the bus
                    assert len(ladder.pending) <= cfg.concurrency
                    async with serving(nc, RandomStrategy.from_options({"seed": 3}), c):
                        await until(lambda: c in _names(ladder), "c joined and played", 120)
                    # c left: once the pool has seen it go, nothing new is scheduled for it.
                    await until(lambda: c not in ladder.pool.members, "c left the pool", 60)
                    await until(
                        lambda: all(c not in p.spec.seats for p in ladder.pending.values()), "c done", 60
                    )
                    before = ladder.scheduled
                    await until(lambda: ladder.scheduled >= before + 3, "more matches", 120)
                    assert all(c not in p.spec.seats for p in ladder.pending.values())
                    await until(lambda: bool(ladder.pending), "a match in flight at the stop", 60)
                    in_flight = set(ladder.pending)
                    counted_first = {r.match_id for r in ladder.results}
                # A new ladder on the same bucket: it has every result, and counts the matches
                # that were in flight at the stop once their records arrive.
                async with running(nc, Ladder(nc, cfg)) as again:
                    assert {r.match_id for r in again.results} >= counted_first
                    await until(
                        lambda: in_flight <= {r.match_id for r in again.results},
                        "the matches in flight at the stop are counted",
                        120,
                    )
        store = await LadderStore.open(nc.jetstream(), cfg.bucket)
        ids = [r.match_id for r in await store.results()]
        assert len(ids) == len(set(ids))
        # Every counted result is a record of the referee's: its ended event is in the stream.
        js = nc.jetstream()
        for mid in ids[:5]:
            msg = await js.get_last_msg("SPIELBUS_MATCHES", f"spielbus.match.{mid}.ended")
            assert cfg.name.encode() in (msg.data or b"")
    finally:
        await nc.drain()


async def test_faulting_entry_is_benched_with_its_reason(nats_url: str) -> None:
    good, other, bad = uid("lg"), uid("lo"), uid("lx")
    cfg = _config(
        [good, other, bad],
        # The garbage bot faults at once whatever the clock; a long one keeps a good bot on a loaded
        # machine from timing out into a 600 s bench (tests/test_ladder_page.py failed so once).
        deadline_ms=10_000,
        quarantine=QuarantineConfig(limit=2, backoff_s=600, max_backoff_s=600),
    )
    nc = await connect(nats_url, name="ladder-faults")

    try:
        async with referee(nc), serving(nc, RandomStrategy.from_options({"seed": 1}), good):
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), other):
                # A hand-written bot that answers every turn with garbage, announced as a nats.micro
                # service (what the pool asks) with no endpoints of its own.
                svc = await add_service(
                    nc, ServiceConfig(name=bad, version="1.0.0", metadata={"kind": "bad"})
                )
                try:
                    async with raw_responder(nc, bad, _garbage):
                        async with running(nc, Ladder(nc, cfg)) as ladder:

                            def benched() -> bool:
                                return any(r["name"] == bad and r["benched"] for r in _rows(ladder))

                            await until(benched, "the faulting entry is benched", 120)
                            reason = next(r["benched"] for r in _rows(ladder) if r["name"] == bad)
                            assert "faulted matches in a row" in reason
                            await until(lambda: not ladder.pending, "in-flight matches ended", 60)
                            n = ladder.scheduled
                            await until(lambda: ladder.scheduled >= n + 2, "more matches", 60)
                            assert all(bad not in p.spec.seats for p in ladder.pending.values())
                        # A restarted ladder reads the bench from its bucket: still benched, same reason.
                        async with running(nc, Ladder(nc, cfg)) as again:
                            # Kept under the account (bus/identity.py: agent-<name>), not the name@hash entry.
                            assert again.quarantine.benched(again.clock()) == {f"agent-{bad}": reason}
                            n = again.scheduled
                            await until(lambda: again.scheduled >= n + 2, "more matches", 60)
                            assert all(bad not in p.spec.seats for p in again.pending.values())
                finally:
                    await svc.stop()
    finally:
        await nc.drain()


async def test_changing_options_keeps_the_bench(nats_url: str) -> None:
    """Issue 41: a bot that always faults and changes its options after each bench (a new
    `name@hash` entry each time) stays benched: the bench follows its account, not the entry."""
    good, other, bad = uid("kg"), uid("ko"), uid("kx")
    cfg = _config(
        [good, other, bad],
        # The garbage bot faults at once whatever the clock; a long one keeps a good bot on a loaded
        # machine from timing out into a 600 s bench (tests/test_ladder_page.py failed so once).
        deadline_ms=10_000,
        quarantine=QuarantineConfig(limit=2, backoff_s=600, max_backoff_s=600),
    )
    nc = await connect(nats_url, name="ladder-rotate")

    async def announce(i: int) -> Any:
        return await add_service(
            nc, ServiceConfig(name=bad, version="1.0.0", metadata={"kind": "bad", "options_hash": str(i)})
        )

    try:
        async with referee(nc), serving(nc, RandomStrategy.from_options({"seed": 1}), good):
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), other):
                svc = await announce(0)
                try:
                    async with raw_responder(nc, bad, _garbage), running(nc, Ladder(nc, cfg)) as ladder:
                        await until(lambda: bool(ladder.quarantine.benched(ladder.clock())), "benched", 120)
                        first = ladder.pool.members[bad].entry
                        for i in range(1, 3):  # new options, a new entry: still benched
                            await svc.stop()
                            svc = await announce(i)

                            def rotated(old: str = first) -> bool:
                                m = ladder.pool.members.get(bad)
                                return m is not None and m.entry != old

                            await until(rotated, "the pool saw the new entry", 60)
                            first = ladder.pool.members[bad].entry
                            n = ladder.scheduled
                            await until(lambda n=n: ladder.scheduled >= n + 3, "more matches", 60)
                            assert all(bad not in p.spec.seats for p in ladder.pending.values())
                        assert ladder.quarantine.benched(ladder.clock()).keys() == {f"agent-{bad}"}
                        unrated = {u["entry"]: u for u in ladder.leaderboard()["unrated"]}
                        assert unrated[first]["benched"] and unrated[first]["account"] == f"agent-{bad}"
                finally:
                    await svc.stop()
    finally:
        await nc.drain()


async def test_nats_restart_mid_run(tmp_path: Path) -> None:
    """nats-server stopped and started again on the same store folder while the ladder runs: the
    ladder rides it out (it does not crash while the bus is away) and goes on counting, each once."""
    port = free_port()
    cmd = [find_binary(), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path)]
    url = f"nats://127.0.0.1:{port}"

    def start() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
        )

    proc = start()
    a, b = uid("ra"), uid("rb")
    cfg = _config([a, b])
    try:
        await _listening(port)
        nc = await connect(url, name="ladder-restart", service=True)
        async with referee(nc), serving(nc, RandomStrategy.from_options({"seed": 1}), a):
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), b):
                ladder = Ladder(nc, cfg)
                async with running(nc, ladder):
                    await until(lambda: len(ladder.results) >= 3, "three results", 120)
                    stop_process(proc, grace_s=10)
                    await until(lambda: not nc.is_connected, "the ladder saw the bus go", 30)
                    await asyncio.sleep(2)  # a few rounds of the ladder with the bus away
                    n = len(ladder.results)
                    proc = start()
                    await until(lambda: len(ladder.results) >= n + 3, "counting again after the restart", 180)
        store = await LadderStore.open(nc.jetstream(), cfg.bucket)
        ids = [r.match_id for r in await store.results()]
        assert len(ids) == len(set(ids)) and len(ids) >= n + 3
        await nc.drain()
    finally:
        stop_process(proc, grace_s=10)


async def test_three_player_game_rated_by_openskill(nats_url: str) -> None:
    """Three-player Kuhn poker among four entries: groups of three, every seat's place stored, the
    leaderboard with openskill's mu and sigma beside Bradley-Terry."""
    names = [uid(f"n{i}") for i in range(4)]
    cfg = _config(names, games=[GameSpec(name="kuhn_poker", params={"players": 3})], concurrency=1)
    nc = await connect(nats_url, name="ladder-nplayer")
    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(referee(nc))
            for i, n in enumerate(names):
                await stack.enter_async_context(serving(nc, RandomStrategy.from_options({"seed": i}), n))
            async with running(nc, Ladder(nc, cfg)) as ladder:
                await until(lambda: len(ladder.results) >= 6 and len(ladder.rows) == 4, "six results", 120)
            # Stopped: the leaderboard has caught up with every counted result.
            assert all(len(r.seats) == 3 and sorted(r.ranks)[0] == 1 for r in ladder.results)
            assert _names(ladder) == set(names)
            rows = _rows(ladder)
            assert all(r["pl_mu"] is not None and r["pl_sigma"] > 0 for r in rows)
            assert sum(r["games"] for r in rows) == 3 * len(ladder.results)
    finally:
        await nc.drain()


def test_ladder_file_errors_name_the_line() -> None:
    import pytest

    from referee.config import ConfigError

    with pytest.raises(ConfigError, match=r"<ladder>:2: concurrency"):
        parse_ladder(
            'name = "x"\nconcurrency = "4"\n[[games]]\nname = "tic_tac_toe"\n[agents.a]\n[agents.b]\n'
        )
    with pytest.raises(ConfigError, match="unknown key"):
        parse_ladder('bogus = 1\n[[games]]\nname = "tic_tac_toe"\n[agents.a]\n[agents.b]\n')


def test_rate_limit_is_a_token_bucket() -> None:
    from referee.ladder.service import RateLimit

    rl = RateLimit(60.0, burst=2, now=0.0)
    assert rl.available(0.0) == 2
    rl.take()
    rl.take()
    assert rl.available(0.5) == 0  # one match a second: half a token
    assert rl.available(1.0) == 1
    assert rl.available(100.0) == 2  # never more than the burst


def test_groups_stay_within_a_budget_class() -> None:
    # N-player grouping (`_groups`) places no entry with another budget class, even the most
    # uncertain one; no network needed (the loop is not run).
    ladder = Ladder(cast(NATS, None), _config(["a", "b", "c", "d", "e"]))
    classes = {"a": "8 calls", "b": "unlimited", "c": "unlimited", "d": "8 calls", "e": "unlimited"}
    groups = ladder._groups("g", list(classes), 3, {e: 1 for e in classes}, 5, classes)
    assert [sorted(g) for g in groups] == [["b", "c", "e"]]
