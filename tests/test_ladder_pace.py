"""The ladder's pace (referee/ladder/pace.py and its use in referee/ladder/service.py, issue 41):
a pairing of two accounts stops being scheduled at its cap per hour or in all, and starts again
when the hour has passed; a bot that changes options does not reset its pace (pairings are of
accounts); the page data lists paced pairings; the logs are a timestamped summary per interval,
not a line per scheduled match."""

from __future__ import annotations

import asyncio
import logging
import re
from pathlib import Path

import pytest

from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.process import stop_process
from referee.ladder.config import PaceConfig
from referee.ladder.pace import HOUR_S, AccountRate, paced
from referee.ladder.service import Ladder
from tests.helpers import serving, spielbus_process, uid, until
from tests.test_ladder_service import _config, referee, running


def test_per_hour_and_total_caps() -> None:
    hour = PaceConfig(per_pairing_per_hour=2, per_pairing=0)
    ms = [("g", ["a", "b"], 10.0), ("g", ["b", "a"], 20.0), ("g", ["a", "c"], 30.0), ("h", ["a", "b"], 5.0)]
    out = paced(ms, hour, now=100.0)
    assert list(out) == [("g", "a", "b")]  # per game and pair of accounts, either seat order
    assert out[("g", "a", "b")].until == 10.0 + HOUR_S and out[("g", "a", "b")].last_hour == 2
    assert paced(ms, hour, now=10.0 + HOUR_S + 1) == {}  # the first aged out of the hour
    total = PaceConfig(per_pairing_per_hour=0, per_pairing=2)
    assert paced(ms, total, now=1e9)[("g", "a", "b")].until is None  # never again
    assert paced(ms, PaceConfig(per_pairing_per_hour=0), now=0.0) == {}


def test_account_rate() -> None:
    rate = AccountRate(per_minute=6)  # one match per 10 s per account
    assert rate.available("a", 0.0) == 1
    rate.take("a", 0.0)
    assert rate.available("a", 5.0) == 0 and rate.available("b", 5.0) == 1
    assert rate.available("a", 10.0) == 1
    assert AccountRate(0).available("a", 0.0) > 1000  # no cap


class Clock:
    def __init__(self) -> None:
        self.offset = 0.0

    def __call__(self) -> float:
        import time

        return time.time() + self.offset


async def test_pairing_stops_at_its_pace_and_options_do_not_reset_it(
    nats_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    a, b = uid("pa"), uid("pb")
    cfg = _config([a, b], pace=PaceConfig(per_pairing_per_hour=3), limits={"log_interval_s": 0.2})
    clock = Clock()
    nc = await connect(nats_url, name="ladder-pace")
    caplog.set_level(logging.INFO, logger="referee.ladder.service")
    try:
        async with referee(nc), serving(nc, RandomStrategy.from_options({"seed": 1}), a):
            ladder = Ladder(nc, cfg, clock=clock)
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), b):
                async with running(nc, ladder):
                    await until(lambda: len(ladder.results) >= 3, "three results", 120)
                    await asyncio.sleep(2)  # rounds of the ladder at its pace
                    assert ladder.scheduled == 3
                    board = ladder.leaderboard()
                    [p] = board["paced"]
                    assert p["accounts"] == sorted([f"agent-{a}", f"agent-{b}"])
                    assert p["last_hour"] == 3 and p["until"] > clock()
                    entry = ladder.pool.members[b].entry
            # b back with other options: a new entry of the same account, still at its pace (a
            # new ladder on the same bucket: the pace is rebuilt from the stored results).
            async with serving(nc, RandomStrategy.from_options({"seed": 3}), b):
                async with running(nc, Ladder(nc, cfg, clock=clock)) as again:
                    await until(lambda: b in again.pool.members, "b back", 60)
                    assert again.pool.members[b].entry != entry
                    await asyncio.sleep(2)
                    assert again.scheduled == 0 and len(again.paced) == 1
                    clock.offset = HOUR_S + 1  # the hour is over: the pairing plays again
                    await until(lambda: again.scheduled > 0, "scheduled again", 60)
    finally:
        await nc.drain()
    lines = [r.getMessage() for r in caplog.records]
    assert not [m for m in lines if "scheduled " + cfg.name in m]  # no line per match
    assert any(re.search(r", last \d+ s: \d+ scheduled, \d+ counted", m) for m in lines)


def test_logs_are_timestamped_summaries(nats_url: str, tmp_path: Path) -> None:
    cfg = tmp_path / "ladder.toml"
    cfg.write_text(
        f'name = "{uid("ll")}"\nbucket = "{uid("LLOG").replace("-", "_")}"\nprobe_s = 0.2\n'
        '[limits]\nlog_interval_s = 0.5\n[[games]]\nname = "tic_tac_toe"\n[agents.x1]\n[agents.x2]\n'
    )
    proc = spielbus_process("ladder", str(cfg), "--nats", nats_url)
    try:
        assert proc.stdout is not None
        seen = []
        for line in proc.stdout:
            seen.append(line)
            if ", last " in line:
                assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", line), line
                assert "0 in the pool" in line
                break
        else:
            raise AssertionError("no summary line:\n" + "".join(seen[-20:]))
    finally:
        stop_process(proc)


async def test_per_account_rate(nats_url: str) -> None:
    """`per_account_per_minute = 6`: an account starts one match per 10 s of the ladder's clock,
    however many free slots and tokens the ladder has (the clock stands still, then moves 10 s)."""
    a, b = uid("ra"), uid("rb")
    cfg = _config([a, b], pace=PaceConfig(per_pairing_per_hour=0, per_account_per_minute=6))
    now = [1e9]
    nc = await connect(nats_url, name="ladder-account-rate")
    try:
        async with referee(nc), serving(nc, RandomStrategy.from_options({"seed": 1}), a):
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), b):
                async with running(nc, Ladder(nc, cfg, clock=lambda: now[0])) as ladder:
                    await until(lambda: len(ladder.results) >= 1, "one result", 120)
                    await asyncio.sleep(2)  # rounds of the ladder, its clock standing still
                    assert ladder.scheduled == 1
                    now[0] += 10.0
                    await until(lambda: ladder.scheduled >= 2, "scheduled again", 60)
                    await asyncio.sleep(2)
                    assert ladder.scheduled == 2
    finally:
        await nc.drain()
