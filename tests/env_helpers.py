"""Helpers of the training-environment tests: tournament configs, and an agent served from a thread
(an opponent the test can stall or disconnect while the environment's own loop plays on)."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import nats.errors

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from agents.random_agent import RandomStrategy
from agents.runtime import AgentService
from bus.connect import connect
from bus.protocol import Turn
from bus.subjects import Subjects
from referee.config import TournamentConfig, parse_config


def config(
    game: str = "tic_tac_toe",
    *,
    agents: str = '[agents.rand]\nkind = "random"\noptions = { seed = 1 }\n',
    policy: str = "forfeit",
    deadline_ms: int = 30_000,
    run_dir: Path | None = None,
    extra: str = "",
) -> TournamentConfig:
    name, _, params = game.partition("(")
    params_toml = ""
    if params:
        pairs = [p.split("=") for p in params.rstrip(")").split(",")]
        params_toml = "params = { " + ", ".join(f"{k} = {v}" for k, v in pairs) + " }\n"
    text = (
        f'name = "envtest"\ndeadline_ms = {deadline_ms}\nrun_dir = "{run_dir or "runs"}"\n{extra}'
        f'[policy]\nkind = "{policy}"\n[[games]]\nname = "{name}"\n{params_toml}{agents}'
    )
    return parse_config(text)


class Stall(Strategy):
    """Never answers in time: the runtime refuses the turn at its deadline (a `timeout`)."""

    kind = "stall"

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


class ThreadAgent:
    """An agent service on its own loop in a thread; `disconnect()` closes its NATS connection."""

    def __init__(self, url: str, name: str, strategy: Strategy | None = None) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.strategy = strategy or RandomStrategy(StrategyOptions(seed=1))
        self.url, self.name = url, name
        self.nc = self._call(connect(url, name=f"test-{name}"))
        self.service = AgentService(self.nc, self.strategy, name=name)
        self._call(self.service.start())

    def _call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def disconnect(self) -> None:
        """Close the agent's connection and wait until the server has dropped its subscription.
        The server notices a closed connection on its own time; a turn it routes before then is
        lost with the connection, which the referee rightly records as a `timeout`, not as the
        `no_responder` of an agent that has left."""
        if not self.nc.is_closed:
            self._call(self.nc.close())
            self._call(_until_nobody_listens(self.url, Subjects().turn(self.name)))

    def stop(self) -> None:
        self.disconnect()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


async def _until_nobody_listens(url: str, subject: str, wait_s: float = 30.0) -> None:
    """Return once a request on `subject` finds no responders (raises after `wait_s`)."""
    nc = await connect(url, name="test-probe")
    try:
        end = time.monotonic() + wait_s
        while time.monotonic() < end:
            try:
                await nc.request(subject, b"", timeout=0.5)
            except nats.errors.NoRespondersError:
                return
            except nats.errors.TimeoutError:
                pass  # routed to the closing connection: the server has not dropped it yet
            await asyncio.sleep(0.05)
        raise TimeoutError(f"{subject} still had a listener {wait_s:.0f} s after its agent disconnected")
    finally:
        await nc.close()
