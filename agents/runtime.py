"""The agent service: serves one `Strategy` over NATS.

- Registers as a `nats.micro` service named after the agent, so `$SRV.INFO` /
  `$SRV.PING` find it, with kind, version and accepted games in its metadata.
- Answers `turn` requests on `<prefix>.turn.<name>` in queue group `<name>`:
  replicas of one agent share the load. Each request runs in its own task,
  at most `max_concurrency` at once (the rest wait, on the referee's clock).
- Listens to `<prefix>.notify.<name>` (every replica, no queue group) to set up
  and drop per-match state.
- A strategy that raises, or a malformed request, gets no move: the reply is an
  error note and the referee records the fault. The service keeps running.
- On SIGTERM/SIGINT: stop taking turns (one that still arrives gets an immediate error
  reply, so the referee need not wait out its deadline), finish those in flight, drain, exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointConfig, Service, ServiceConfig
from pydantic import ValidationError

from agents.base import MatchContext, Strategy
from bus.connect import connect
from bus.protocol import MatchEnded, MatchStarted, Move, Turn
from bus.subjects import Subjects, check_token

log = logging.getLogger(__name__)

# Called after each answered turn (for metrics): turn, move or None, seconds spent.
TurnObserver = Callable[[Turn, Move | None, float], Awaitable[None] | None]


class AgentService:
    def __init__(
        self,
        nc: NATS,
        strategy: Strategy,
        *,
        name: str,
        subjects: Subjects | None = None,
        max_concurrency: int = 16,
        on_turn: TurnObserver | None = None,
    ) -> None:
        self.nc = nc
        self.strategy = strategy
        self.name = check_token(name, "agent name")
        self.subjects = subjects or Subjects()
        self.max_concurrency = max_concurrency
        self.on_turn = on_turn
        self.matches: dict[str, MatchContext] = {}
        self.turns_answered = 0
        self._sem = asyncio.Semaphore(max_concurrency)
        self._tasks: set[asyncio.Task[None]] = set()
        self._service: Service | None = None
        self._notify_sub: Any = None
        self._stopping = False

    def context(self, match_id: str) -> MatchContext:
        ctx = self.matches.get(match_id)
        if ctx is None:
            ctx = self.matches[match_id] = MatchContext(match_id=match_id)
        return ctx

    async def start(self) -> None:
        cls = type(self.strategy)
        self._service = await add_service(
            self.nc,
            ServiceConfig(
                name=self.name,
                version="1.0.0",
                description=f"spielbus agent {self.name} ({cls.kind})",
                metadata={
                    "kind": cls.kind,
                    "strategy_version": cls.version,
                    "games": ",".join(cls.games) or "*",
                    "models": ",".join(self.strategy.models()),
                    "protocol": "1",
                },
            ),
        )
        await self._service.add_endpoint(
            EndpointConfig(
                name="turn",
                subject=self.subjects.turn(self.name),
                queue_group=self.name,
                handler=self._on_turn_request,
            )
        )
        self._notify_sub = await self.nc.subscribe(self.subjects.notify(self.name), cb=self._on_notify)
        await self.nc.flush()
        log.info("agent %s (%s) serving %s", self.name, cls.kind, self.subjects.turn(self.name))

    async def _on_turn_request(self, req: Request) -> None:
        if self._stopping:
            # An answer, not silence: silence would cost the referee the whole turn deadline.
            await req.respond_error("503", f"agent {self.name} is shutting down")
            return
        # Handle concurrently: the micro endpoint would otherwise serve one turn at a time.
        task = asyncio.create_task(self._handle_turn(req))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _handle_turn(self, req: Request) -> None:
        async with self._sem:
            loop = asyncio.get_running_loop()
            t0 = loop.time()
            try:
                turn = Turn.model_validate_json(req.data)
            except ValidationError as exc:
                await req.respond_error("400", f"malformed turn: {exc.error_count()} errors")
                return
            move: Move | None = None
            try:
                decision = await self.strategy.decide(turn, self.context(turn.match_id))
                move = Move(
                    match_id=turn.match_id,
                    turn=turn.turn,
                    action=decision.action,
                    action_text=decision.action_text,
                    policy=decision.policy,
                    usage=decision.usage,
                    stats=decision.stats,
                    note=decision.note,
                )
                await req.respond(move.model_dump_json(exclude_none=True).encode())
                self.turns_answered += 1
            except Exception as exc:
                log.exception("agent %s failed on turn %s of %s", self.name, turn.turn, turn.match_id)
                await req.respond_error("500", f"{type(exc).__name__}: {exc}"[:500])
            finally:
                if self.on_turn is not None:
                    res = self.on_turn(turn, move, loop.time() - t0)
                    if asyncio.iscoroutine(res):
                        await res

    async def _on_notify(self, msg: Msg) -> None:
        try:
            head = MatchStarted.model_validate_json(msg.data)
        except ValidationError:
            head = None
        try:
            if head is not None:
                await self.strategy.match_started(head, self.context(head.match_id))
                return
            ended = MatchEnded.model_validate_json(msg.data)
        except ValidationError:
            log.warning("agent %s: ignoring malformed notification", self.name)
            return
        except Exception:
            log.exception("agent %s: match_started hook failed", self.name)
            return
        try:
            await self.strategy.match_ended(ended, self.context(ended.match_id))
        except Exception:
            log.exception("agent %s: match_ended hook failed", self.name)
        finally:
            self.matches.pop(ended.match_id, None)

    async def stop(self) -> None:
        """Stop taking turns, finish the ones in flight, then drain the connection."""
        self._stopping = True
        # Let turns the server has already sent us arrive and be refused before unsubscribing:
        # unsubscribing drops whatever is still queued in the client, unanswered.
        with contextlib.suppress(Exception):
            await self.nc.flush(timeout=2)
        await asyncio.sleep(0)
        if self._service is not None:
            await self._service.stop()
        if self._notify_sub is not None:
            with contextlib.suppress(Exception):
                await self._notify_sub.unsubscribe()
        if self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
        await self.strategy.close()


async def serve(
    strategy: Strategy,
    *,
    name: str,
    url: str | None = None,
    prefix: str = "spielbus",
    max_concurrency: int = 16,
    ready: Callable[[], None] | None = None,
    on_turn: TurnObserver | None = None,
    user: str | None = None,
    password: str | None = None,
) -> None:
    """Run an agent service until SIGTERM/SIGINT, then drain and return.

    `user`/`password`: an explicit login (`--auth DIR`); without one, `bus.connect` reads the environment.
    """
    nc = await connect(url, name=f"agent-{name}", service=True, user=user, password=password)
    service = AgentService(
        nc, strategy, name=name, subjects=Subjects(prefix), max_concurrency=max_concurrency, on_turn=on_turn
    )
    await service.start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready()
    await stop.wait()
    log.info("agent %s: draining", name)
    await service.stop()
    await nc.drain()
