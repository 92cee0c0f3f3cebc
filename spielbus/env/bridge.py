"""The learning seat as an agent: turns from the referee handed to the environment's caller.

`BridgeStrategy` is an ordinary `Strategy` served by the agent runtime under the learner's name, so
the learning seat subscribes to its turn subject, registers, keeps its clock and is refereed like
any other agent. Its `decide` puts the turn on the match's `Episode` queue (read by the caller's
thread) and waits for the caller's action. The turn's clock runs meanwhile: a caller that takes
longer than the tournament's `deadline_ms` between two calls gets the runtime's refusal, which the
referee records as a `timeout` of the learner (and the fault policy decides).

The referee, which runs in the environment's process, asks the learning seat there too
(`LocalLearner`, a `referee.request.LocalSeat`): the turn as the model an agent validates from the
turn's bytes goes to `decide` and the move, made as the agent runtime makes it (`move_for`), comes
back to the referee, on the turn's clock, without the two trips through nats-server a bus request
took (half of a step's round trips against a bus opponent: docs/env.md) and without JSON written
only to be read back in the same process. The learner's agent service stays registered (the
referee reads its provenance there); its turn and notification subjects are simply not used.

An abandoned episode (a `reset()` or `close()` while its match is live) refuses every further turn
of its learning seats at once (`Abandoned`, which reaches the referee as an agent's service error
would): the referee records an `error` fault and applies the tournament's fault policy (`forfeit`
ends the match, `retry` asks again and then forfeits, `random` plays random legal moves for the
seat to the end), so the match still ends with a record.
"""

from __future__ import annotations

import asyncio
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from agents.runtime import move_for
from bus.protocol import MatchRecord, MatchSpec, Move, Turn


class EnvError(RuntimeError):
    """The environment cannot go on: the bus, the referee or an opponent failed (the message says which)."""


class Abandoned(RuntimeError):
    """The environment gave this match up (reset or close while it was live)."""


def _settle_all(answers: list[tuple[asyncio.Future[Decision], Decision]]) -> None:
    for fut, decision in answers:
        if not fut.done():
            fut.set_result(decision)


@dataclass
class Ask:
    """A turn the referee asks a learning seat, waiting for the caller's action."""

    turn: Turn
    future: asyncio.Future[Decision]
    loop: asyncio.AbstractEventLoop

    def answer(self, action: int) -> bool:
        """Send `action` (thread-safe). False when the turn is already over (its clock ran out, or
        the episode was abandoned): the referee has then recorded the fault without it."""
        return answer_all([(self, action)])[0]


def answer_all(answers: list[tuple[Ask, int]]) -> list[bool]:
    """`Ask.answer` for many turns of one loop with one hand-off to it (a vector environment's step:
    one wake-up of the loop's thread instead of one per sub-environment). Thread-safe."""
    sent = [not ask.future.done() for ask, _ in answers]
    batch = [(ask.future, Decision(action=a)) for (ask, a), ok in zip(answers, sent, strict=True) if ok]
    if batch:
        answers[0][0].loop.call_soon_threadsafe(_settle_all, batch)
    return sent


class Episode:
    """One match played through an environment: its spec, and the events the caller reads."""

    def __init__(self, spec: MatchSpec, loop: asyncio.AbstractEventLoop) -> None:
        self.spec = spec
        self.loop = loop
        # ("turn", Turn, future) from the bridge; ("ended", record) or ("error", exception) at the end.
        self.events: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self.record: MatchRecord | None = None
        self.done = False
        self.abandoned = False
        self.waiting: set[asyncio.Future[Decision]] = set()  # touched on the loop only

    def abandon_in_loop(self) -> None:
        """Refuse the turns waiting and every later one (call on the session's loop)."""
        self.abandoned = True
        for fut in self.waiting:
            if not fut.done():
                fut.set_exception(Abandoned("the environment abandoned this match (reset or close)"))

    def next_event(self, timeout: float | None, alive: Callable[[], bool]) -> Ask | MatchRecord:
        """The next turn of a learning seat, or the match's record once it has ended. Raises
        `EnvError` when the match failed, the session stopped, or `timeout` seconds passed."""
        end = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                kind, *rest = self.events.get(timeout=0.5)
            except queue.Empty:
                if not alive():
                    raise EnvError("the training session stopped") from None
                if end is not None and time.monotonic() > end:
                    raise EnvError(
                        f"match {self.spec.match_id}: nothing happened within {timeout} s"
                    ) from None
                continue
            if kind == "turn":
                return Ask(rest[0], rest[1], self.loop)
            self.done = True
            if kind == "ended":
                self.record = rest[0]
                return rest[0]
            exc = rest[0]
            raise EnvError(f"match {self.spec.match_id} failed: {exc!r}") from exc


class BridgeStrategy(Strategy):
    """The learner's strategy: each decision is the environment caller's."""

    kind = "env"

    def __init__(self) -> None:
        super().__init__(StrategyOptions())
        self.episodes: dict[str, Episode] = {}

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        ep = self.episodes.get(turn.match_id)
        if ep is None:
            raise RuntimeError(f"match {turn.match_id} is not one of this environment's")
        if ep.abandoned:
            raise Abandoned("the environment abandoned this match (reset or close)")
        fut: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        ep.waiting.add(fut)
        ep.events.put(("turn", turn, fut))
        try:
            return await fut
        finally:
            ep.waiting.discard(fut)


class LocalLearner:
    """The learning seats' turns answered in this process (see the module docstring): the move for
    the caller's action, as the agent runtime makes it (`move_for`); the strategy's failure (such
    as an abandoned episode) raises, which the referee records as an `error` fault."""

    def __init__(self, bridge: BridgeStrategy) -> None:
        self.bridge = bridge

    async def __call__(self, turn: Turn) -> Move:
        return move_for(turn, await self.bridge.decide(turn, MatchContext(match_id=turn.match_id)))
