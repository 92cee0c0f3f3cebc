"""`$SRV.STATS` (`nats micro stats`) tells the truth about an agent's turns (issue 11): every turn
request counted, timed from arrival to reply, each refusal or failure an error with its code, while
turns still run concurrently. Real nats-server; the stats are asked on the bus as `nats micro stats`
asks them. Times are checked only from below (a turn that sleeps 0.2 s cannot take less)."""

from __future__ import annotations

import asyncio
import json

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from bus.protocol import Turn
from tests.helpers import serving, uid
from tests.test_agent_deadlines import _ask, _turn


class Sleepy(Strategy):
    """Sleeps 0.2 s; raises on turn 2; counts how many turns ran at once."""

    kind = "sleepy"

    def __init__(self) -> None:
        super().__init__(StrategyOptions())
        self.running = 0
        self.most = 0

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            await asyncio.sleep(0.2)
            if turn.turn == 2:
                raise RuntimeError("this turn always fails")
            return Decision(action=turn.legal_actions[0].id)
        finally:
            self.running -= 1


async def _stats(nc, name: str) -> dict:
    msg = await nc.request(f"$SRV.STATS.{name}", b"", timeout=10)
    stats = json.loads(msg.data)
    [endpoint] = stats["endpoints"]
    return endpoint


async def test_srv_stats_count_time_and_errors_of_concurrent_turns(nc) -> None:
    name = uid("stats")
    strategy = Sleepy()
    async with serving(nc, strategy, name):
        got = await asyncio.gather(*(_ask(nc, name, _turn(uid("m"), 1, 30_000)) for _ in range(3)))
        assert got == ["move"] * 3
        assert strategy.most == 3  # concurrent, not one at a time
        assert await _ask(nc, name, _turn(uid("m"), 2, 30_000)) == "refused"  # the strategy raised
        bad = await nc.request(f"spielbus.turn.{name}", b"not a turn", timeout=10)
        assert bad.headers is not None and bad.headers["Nats-Service-Error-Code"] == "400"
        stats = await _stats(nc, name)
    assert stats["name"] == "turn" and stats["queue_group"] == name
    assert stats["num_requests"] == 5
    assert stats["num_errors"] == 2
    assert "400" in stats["last_error"] and "malformed turn" in stats["last_error"]
    # Five requests, four of which slept 0.2 s in the strategy: the framework timed the turns,
    # not a hand-off of microseconds.
    assert stats["processing_time"] >= 4 * 0.2e9
    assert stats["average_processing_time"] >= 4 * 0.2e9 / 5


async def test_a_strategy_failure_is_the_endpoints_last_error(nc) -> None:
    name = uid("stats")
    async with serving(nc, Sleepy(), name):
        assert await _ask(nc, name, _turn(uid("m"), 2, 30_000)) == "refused"
        stats = await _stats(nc, name)
    assert stats["num_requests"] == 1 and stats["num_errors"] == 1
    assert stats["last_error"].startswith("500:") and "this turn always fails" in stats["last_error"]
