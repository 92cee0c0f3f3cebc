"""The agent service: serves one `Strategy` over NATS.

- Registers as a `nats.micro` service named after the agent, so `$SRV.INFO` /
  `$SRV.PING` find it, with kind, version and accepted games in its metadata.
- Answers `turn` requests on `<prefix>.turn.<name>` in queue group `<name>`:
  replicas of one agent share the load. Each request runs in its own task,
  at most `max_concurrency` at once; up to `max_backlog` more wait their turn.
- Deadlines: each turn's clock starts when it arrives (or, when the turn carries the
  referee's `sent_at` and it is not ahead of this host's clock, when the referee
  sent it, whichever is earlier); the strategy must be done `reserve` before the end
  (5% of the deadline, at least 20 ms, at most a quarter of it). The strategy gets
  that instant as `ctx.deadline` (a `time.monotonic()` value). A turn whose time ran
  out while it waited in the queue, whose strategy overruns, or that finds the
  backlog full, is refused at once with a service error (code 504 when the turn's time
  ran out, which the referee records as `timeout`; 503 for a full backlog, an `error`)
  instead of waiting out its clock, and nothing is computed for a turn that can no
  longer count.
- Rules text: the referee sends it on a seat's first turn only, to whichever replica
  takes that turn. For strategies that read it (`Strategy.wants_rules`), a turn
  without it gets the text derived here from the game spec (cached per spec), so
  every replica plays with the rules.
- Listens to `<prefix>.notify.<name>` (every replica, no queue group) to set up
  and drop per-match state.
- A strategy that raises, or a malformed request, gets no move: the reply is an
  error note and the referee records the fault. The service keeps running.
- A strategy that raises `ProviderFailure` (its LLM provider failed the decision: an outage, a
  rate limit, a hang) answers a `move` without an action, carrying `failure` (kind `provider`,
  the cause, the failed calls' ids): the referee's `[policy] provider` decides (void by default),
  so a provider's outage is never scored as the model's play. `Decision.calls`, the LLM calls
  behind a decision, travel in the move's `calls` (texts cut to the protocol's bounds; the
  thinking is dropped, longest first, when the move would not fit in `bus.replies.MAX_REPLY_BYTES`).
- On SIGTERM/SIGINT: stop taking turns (one that still arrives gets an immediate error
  reply, so the referee need not wait out its deadline), finish those in flight, drain, exit.

- `$SRV.STATS` (`nats micro stats`) tells the truth about turns: nats.micro's own accounting
  counts every turn request, times it from arrival to reply, and counts each refusal or failure
  as an error with its code (`bus.micro` runs that accounting per request, concurrently).
  Refusals by reason and decision times are also the agent's Prometheus metrics (`agents.metrics`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.micro import add_service
from nats.micro.request import Request, ServiceError
from nats.micro.service import EndpointConfig, Service, ServiceConfig
from pydantic import ValidationError

from agents.base import Decision, MatchContext, ProviderFailure, Strategy, TurnExpired
from bus.connect import connect, flush
from bus.micro import ConcurrentEndpoint, add_concurrent_endpoint, request_arrival
from bus.protocol import (
    ANY_TURN,
    COMPACT,
    MAX_CAUSE,
    MAX_MOVE_CALLS,
    PROBE_HEADER,
    TURN_FORM_KEY,
    CompactTurn,
    LLMCall,
    MatchEnded,
    MatchStarted,
    Move,
    MoveFailure,
    Turn,
)
from bus.replies import MAX_REPLY_BYTES
from bus.subjects import Subjects, check_agent_name
from games.loader import GameSpecError, load_game_async
from games.rules import rules_text

log = logging.getLogger(__name__)

# Called after each answered turn (for metrics): turn, move or None, seconds spent.
TurnObserver = Callable[[Turn | CompactTurn, Move | None, float], Awaitable[None] | None]

_rules_cache: dict[str, str | None] = {}
# This process's agent service's connection and prefix: what the LLM layer's shared provider
# limits ask the bus's limiter service through (agents/llm/limits.py).
_bus: tuple[NATS, str, str] | None = None


def current_bus() -> tuple[NATS, str, str] | None:
    """The bus connection, subject prefix and agent name of the agent service this process serves."""
    return _bus


async def local_rules(turn: Turn) -> str | None:
    """The rules text the referee would send for `turn.game`, derived here (cached per spec);
    None for a game this process cannot load."""
    label = turn.game.label()
    if label not in _rules_cache:
        try:
            _rules_cache[label] = rules_text(await load_game_async(turn.game))
        except (GameSpecError, ValueError, RuntimeError):
            _rules_cache[label] = None
    return _rules_cache[label]


def move_calls(raw: list[dict[str, Any]] | None) -> list[LLMCall] | None:
    """The decision's call summaries as the move's `calls`: texts cut to the protocol's bounds, at most
    `MAX_MOVE_CALLS` (the last ones), a summary the protocol refuses left out (and logged)."""
    if not raw:
        return None
    out: list[LLMCall] = []
    for item in raw[-MAX_MOVE_CALLS:]:
        try:
            out.append(LLMCall.from_summary(item))
        except (ValidationError, TypeError):
            log.warning("an LLM call summary the protocol refuses was left out of the move", exc_info=True)
    return out or None


def move_for(turn: Turn | CompactTurn, decision: Decision) -> Move:
    """The reply answering `turn` with `decision`."""
    return Move(
        match_id=turn.match_id,
        turn=turn.turn,
        action=decision.action,
        action_text=decision.action_text,
        policy=decision.policy,
        usage=decision.usage,
        stats=decision.stats,
        note=decision.note,
        calls=move_calls(decision.calls),
    )


def fitted(move: Move) -> bytes:
    """The move's JSON, within `MAX_REPLY_BYTES`: the calls' thinking and answers are dropped, longest
    first, until it fits (the agent's call store keeps them whole)."""
    data = move.model_dump_json(exclude_none=True).encode()
    calls = list(move.calls or [])
    order = sorted(
        range(len(calls)), key=lambda i: -len(calls[i].reasoning or "") - len(calls[i].answer or "")
    )
    for i in order:
        if len(data) <= MAX_REPLY_BYTES:
            break
        calls[i] = calls[i].model_copy(update={"reasoning": None, "answer": None})
        data = move.model_copy(update={"calls": calls}).model_dump_json(exclude_none=True).encode()
    return data


def reserve_s(deadline_ms: int) -> float:
    """How long before the end of a turn's clock the agent stops thinking (room for the reply)."""
    total = deadline_ms / 1000
    return min(0.25 * total, max(0.02, 0.05 * total))


def turn_deadline(turn: Turn | CompactTurn, arrival: float) -> float:
    """When thinking must stop (a `time.monotonic()` instant): the turn's clock from its arrival,
    or from the referee's `sent_at` when that is earlier, less the reserve."""
    total = turn.deadline_ms / 1000
    end = arrival + total
    if turn.sent_at is not None:
        age = time.time() - turn.sent_at
        if age >= 0:  # a send time ahead of our clock is skew, not information: ignore it
            end = min(end, time.monotonic() - age + total)
    return end - reserve_s(turn.deadline_ms)


class _Refused(Exception):
    """A turn the agent will not compute: answered at once with a service error."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code


def _error(code: str, description: str) -> ServiceError:
    """What nats.micro answers (its error headers) and counts as the endpoint's error."""
    return ServiceError(code=code, description=description)


class AgentService:
    def __init__(
        self,
        nc: NATS,
        strategy: Strategy,
        *,
        name: str,
        subjects: Subjects | None = None,
        max_concurrency: int = 16,
        max_backlog: int = 64,
        on_turn: TurnObserver | None = None,
    ) -> None:
        if max_concurrency < 1 or max_backlog < 0:
            raise ValueError("max_concurrency must be at least 1 and max_backlog at least 0")
        self.nc = nc
        self.strategy = strategy
        self.name = check_agent_name(name)
        self.subjects = subjects or Subjects()
        self.max_concurrency = max_concurrency
        self.max_backlog = max_backlog
        self.on_turn = on_turn
        self.matches: dict[str, MatchContext] = {}
        self.turns_answered = 0
        self.turns_refused = 0
        self._sem = asyncio.Semaphore(max_concurrency)
        self._endpoint: ConcurrentEndpoint | None = None
        self._service: Service | None = None
        self._notify_sub: Any = None
        self._stopping = False

    def context(self, match_id: str) -> MatchContext:
        ctx = self.matches.get(match_id)
        if ctx is None:
            ctx = self.matches[match_id] = MatchContext(match_id=match_id)
        return ctx

    async def start(self) -> None:
        global _bus
        cls = type(self.strategy)
        _bus = (self.nc, self.subjects.prefix, self.name)
        await self.strategy.start(self.name)
        self._service = await add_service(
            self.nc,
            ServiceConfig(
                name=self.name,
                version="1.0.0",
                description=f"spielbus agent {self.name} ({cls.kind})",
                metadata=self.metadata(),
            ),
        )
        self._endpoint = await add_concurrent_endpoint(
            self._service,
            EndpointConfig(
                name="turn",
                subject=self.subjects.turn(self.name),
                queue_group=self.name,
                handler=self._on_turn_request,
            ),
        )
        self._notify_sub = await self.nc.subscribe(self.subjects.notify(self.name), cb=self._on_notify)
        await flush(self.nc)
        log.info("agent %s (%s) serving %s", self.name, cls.kind, self.subjects.turn(self.name))

    def metadata(self) -> dict[str, str]:
        """The service's discovery metadata (`$SRV.INFO`)."""
        cls = type(self.strategy)
        meta = {
            "kind": cls.kind,
            "strategy_version": cls.version,
            "games": ",".join(self.strategy.games) or "*",  # an instance may narrow them (cwm)
            "models": ",".join(self.strategy.models()),
            "options_hash": self.strategy.options_hash(),  # provenance: a changed prompt shows
            "protocol": "1",
        }
        if cls.compact_turns:
            # Only then: every other agent's metadata (and so its provenance hash) stays as it was.
            meta[TURN_FORM_KEY] = COMPACT
        return meta

    def _in_flight(self) -> int:
        """Turns being handled, this one included (each runs in its own task)."""
        return len(self._endpoint.tasks) if self._endpoint is not None else 0

    async def _on_turn_request(self, req: Request) -> None:
        """One turn, in its own task: answers the move, or raises ServiceError for nats.micro to
        send and count."""
        arrived = request_arrival()
        arrival = arrived.at
        if self._stopping:
            # An answer, not silence: silence would cost the referee the whole turn deadline.
            raise _error("503", f"agent {self.name} is shutting down")
        if arrived.in_flight >= self.max_concurrency + self.max_backlog:
            self.turns_refused += 1
            raise _error("503", f"agent {self.name} is overloaded: {self.max_backlog} turns already waiting")
        await self._handle_turn(req, arrival)

    async def _acquire(self, until: float) -> None:
        """A concurrency slot before `until`, or `_Refused`."""
        wait = until - time.monotonic()
        if wait <= 0:
            raise _Refused("504", "the turn's time ran out before it reached the agent")
        if not self._sem.locked():  # a free slot and nobody queued before us: taken at once
            await self._sem.acquire()
            return
        try:
            # `asyncio.timeout`, not `wait_for`: no extra task per turn (Python 3.11's `wait_for` makes one).
            async with asyncio.timeout(wait):
                await self._sem.acquire()
        except TimeoutError:
            raise _Refused(
                "504",
                f"the turn's time ran out while {self._in_flight() - 1} others held or awaited the agent",
            ) from None

    async def _handle_turn(self, req: Request, arrival: float) -> None:
        try:
            turn: Turn | CompactTurn = (
                ANY_TURN.validate_json(req.data)
                if self.strategy.compact_turns
                else Turn.model_validate_json(req.data)
            )
        except ValidationError as exc:
            raise _error("400", f"malformed turn: {exc.error_count()} errors") from None
        until = turn_deadline(turn, arrival)
        move: Move | None = None
        try:
            await self._acquire(until)
        except _Refused as refused:
            self.turns_refused += 1
            await self._observe(turn, None, arrival)
            raise _error(refused.code, f"agent {self.name}: {refused}") from None
        try:
            if isinstance(turn, Turn) and self.strategy.wants_rules and turn.rules is None:
                rules = await local_rules(turn)
                if rules is not None:
                    turn = turn.model_copy(update={"rules": rules})
            # Per turn: the deadline; `data` is the match's shared state.
            ctx = dataclasses.replace(self.context(turn.match_id), deadline=until)
            left = until - time.monotonic()
            if left <= 0:
                raise _Refused("504", "the turn's time ran out before the strategy could start")
            try:
                async with asyncio.timeout(left):
                    decision = await (
                        self.strategy.decide(turn, ctx)
                        if isinstance(turn, Turn)
                        else self.strategy.decide_compact(turn, ctx)
                    )
                move = move_for(turn, decision)
            except TimeoutError:
                raise _Refused("504", "the strategy did not decide before the deadline") from None
            except ProviderFailure as failed:
                log.warning(
                    "agent %s: provider failed turn %s of %s: %s", self.name, turn.turn, turn.match_id, failed
                )
                move = self._failure(turn, failed)
            await req.respond(fitted(move))
            self.turns_answered += 1
            if self._in_flight() == 1:
                # nats-py's flusher writes the reply only once this task yields: let it, before the
                # bookkeeping below (metrics, nats.micro's timing), which is off the referee's clock.
                # With other turns in flight one of them yields soon enough, and one write for
                # several replies is cheaper than a loop pass each.
                await asyncio.sleep(0)
        except (_Refused, TurnExpired) as refused:
            self.turns_refused += 1
            code = refused.code if isinstance(refused, _Refused) else "504"
            raise _error(code, f"agent {self.name}: {refused}") from None
        except Exception as exc:
            log.exception("agent %s failed on turn %s of %s", self.name, turn.turn, turn.match_id)
            raise _error("500", f"{type(exc).__name__}: {exc}"[:500]) from exc
        finally:
            self._sem.release()
            await self._observe(turn, move, arrival)

    @staticmethod
    def _failure(turn: Turn | CompactTurn, failed: ProviderFailure) -> Move:
        """The reply for a decision the provider failed: no action, the failure with its cause."""
        ids = [str(c)[:128] for c in failed.calls][-MAX_MOVE_CALLS:]
        cause = str(failed.cause or "provider failure")[:MAX_CAUSE]
        return Move(
            match_id=turn.match_id,
            turn=turn.turn,
            failure=MoveFailure(cause=cause, calls=ids),
            calls=[LLMCall(id=i, outcome="provider") for i in ids] or None,
        )

    async def _observe(self, turn: Turn | CompactTurn, move: Move | None, arrival: float) -> None:
        if self.on_turn is not None:
            res = self.on_turn(turn, move, time.monotonic() - arrival)
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
            # bot-check's deliberate probes are marked; the rest is worth a warning.
            probe = bool(msg.headers and PROBE_HEADER in msg.headers)
            log.log(
                logging.DEBUG if probe else logging.WARNING,
                "agent %s: ignoring malformed notification%s",
                self.name,
                " (a bot-check probe)" if probe else "",
            )
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
        if self._endpoint is not None:
            # Drain the turn endpoint (unsubscribe, round trip, hand over what is still queued:
            # those turns are refused at once, then wait for every turn in flight) instead of
            # `Service.stop`'s plain unsubscribe, which drops turns already delivered to this
            # client and leaves them to the referee's clock.
            with contextlib.suppress(Exception):
                await self._endpoint.drain()
        if self._service is not None:
            with contextlib.suppress(Exception):
                await self._service.stop()
        if self._notify_sub is not None:
            with contextlib.suppress(Exception):
                await self._notify_sub.unsubscribe()
        await self.strategy.close()


async def serve(
    strategy: Strategy,
    *,
    name: str,
    url: str | None = None,
    prefix: str = "spielbus",
    max_concurrency: int = 16,
    max_backlog: int = 64,
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
        nc,
        strategy,
        name=name,
        subjects=Subjects(prefix),
        max_concurrency=max_concurrency,
        max_backlog=max_backlog,
        on_turn=on_turn,
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
    await close_when_stopping(service.stop(), nc)


async def close_when_stopping(stopping: Awaitable[None], nc: NATS, grace_s: float = 10.0) -> None:
    """Finish `stopping`, then drain `nc`; with the bus down (reconnecting) neither may wait
    forever or raise: a SIGTERM must end the process cleanly whatever the bus is doing."""
    try:
        await asyncio.wait_for(stopping, grace_s)
    except Exception:
        log.warning("stopping did not finish cleanly", exc_info=True)
    try:
        if nc.is_connected:
            await asyncio.wait_for(nc.drain(), grace_s)
    except Exception:
        log.info("could not drain the NATS connection; closing it", exc_info=True)
    finally:
        with contextlib.suppress(Exception):
            await nc.close()
