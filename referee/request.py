"""Asking one seat for one decision over NATS: the request, its retries, and the referee's own lag.

`TurnRequest.send` publishes an encoded turn on the agent's turn subject and waits for the reply
until the turn's deadline. What it returns is the agent's (`Reply`: a move, or a fault reason
with its detail); what is not the agent's it raises:

- `no_responder` (nobody listens; NATS answers at once) is asked again with doubling backoff until
  the deadline runs out: an agent restarting, or reconnecting after a NATS restart, is not absent.
  An agent the worker knows absent (referee/presence.py) is waited for up to the presence limit.
- A request that fails because this referee lost its NATS connection raises `MatchAborted` (the
  worker hands the spec back and another attempt replays the match).
- A deadline timer that fired late because this referee's event loop stalled raises `RefereeLag`
  (the caller asks the turn again). The rule for lateness is the timer's: a reply the referee has
  received before its timer fired is in time, whatever the measured latency (which includes the
  referee's own lag) says (`read_late`).

`ask_local` asks a seat answered in the referee's own process instead (`LocalSeat`: a training
environment's learner, docs/env.md): the turn as the model an agent validates from the turn's bytes
(`build_turn`, whose JSON is those bytes: tests/test_turn_encoding.py), the move back as a model, on
the same clock. The bus and JSON are left out (no request, so no `no_responder`, lost connection or
late timer to read; no bytes written only to be read back in the same process); a seat that raises
is an `error` fault, as an agent's service error is.

Limits: what to do about the agent's faults (forfeit, retry, random) is not decided here but by
the policy (referee/faults.py); a reply's content is checked by `bus.replies.check_reply`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bus.protocol import FaultReason, Move, Turn
from bus.replies import MAX_DETAIL, check_reply, wrong_turn
from referee.presence import Presence
from referee.turns import EncodedTurn

# A deadline timer that fires this much later than asked means the referee's loop stalled.
LAG_TOLERANCE_S = 0.25
# A deadline timer this late or later means the loop was busy at the deadline: a reply read in that
# stall may have been waiting in the socket before the deadline, so it is not the agent's fault.
STALL_S = 0.02
# How long after the stalled deadline timer a reply may be read and still count as read in the stall
# (the read loop needs a few passes of the event loop after the timer's own).
STALL_READ_S = 0.05
# Backoff between `no_responder` retries: from the first to the cap, doubling.
NO_RESPONDER_BACKOFF_S = (0.05, 1.0)

# Connection-level failures of a request: the bus's fault, never the agent's.
BUS_ERRORS: tuple[type[BaseException], ...] = (
    nats.errors.ConnectionClosedError,
    nats.errors.ConnectionReconnectingError,
    nats.errors.ConnectionDrainingError,
    nats.errors.StaleConnectionError,
    nats.errors.OutboundBufferLimitError,
    nats.errors.NoServersError,
)


class MatchAborted(Exception):
    """The referee or the bus failed this attempt: no seat is to blame, the match is to be replayed."""


class RefereeLag(Exception):
    """The deadline timer fired `late_s` late: the referee stalled, the turn is to be asked again."""

    def __init__(self, late_s: float) -> None:
        super().__init__(f"deadline timer fired {late_s * 1000:.0f} ms late")
        self.late_s = late_s


@dataclass(frozen=True, slots=True)
class Reply:
    """The agent's answer to one request: a `move` (not yet checked against the legal actions),
    or a fault `reason` with its `detail`; `latency_ms` from request to reply."""

    move: Move | None
    reason: FaultReason | None
    detail: str
    latency_ms: float


def read_late(read_at: float, end: float, timer_lag: float | None) -> bool:
    """Whether a reply read at `read_at` (loop time) missed the deadline `end`. A reply read after
    the deadline is forgiven only when the loop was stalled at the deadline (its timer fired
    `timer_lag` late, at least `STALL_S`) and the reply was read in that stall; a deadline timer
    that ran on time (or well before the read) means the reply came late. `timer_lag` None: the
    timer has not run yet, so the whole overrun counts as the stall."""
    if read_at <= end:
        return False
    stall = timer_lag if timer_lag is not None else read_at - end
    return stall < STALL_S or read_at - end > stall + STALL_READ_S


def _note_lateness(loop: asyncio.AbstractEventLoop, due: float, into: list[float]) -> None:
    into.append(loop.time() - due)


class TurnRequest:
    """One decision's request to one seat (see the module docstring): `send` it once."""

    def __init__(
        self,
        nc: NATS,
        subject: str,
        turn: EncodedTurn,
        agent: str,
        deadline_ms: int,
        presence: Presence | None,
    ) -> None:
        self.nc = nc
        self.subject = subject
        self._turn = turn  # re-stamped when asked again
        self.agent = agent
        self.deadline_ms = deadline_ms
        self.presence = presence
        self._deadline_s = deadline_ms / 1000
        self._end = 0.0  # loop time of the deadline (later while a known-absent agent is waited for)
        # `perf_counter` of the latest ask: the latency's start (the loop's clock may count whole
        # milliseconds: bus/loop.py).
        self._sent = 0.0
        self._backoff = NO_RESPONDER_BACKOFF_S[0]
        self._asked = 0
        self._waiting = False  # counted in `presence.waiters` while a known-absent agent is waited for

    async def send(self) -> Reply:
        """The agent's reply or fault; raises `MatchAborted` or `RefereeLag` (not the agent's)."""
        loop = asyncio.get_running_loop()
        self._end = loop.time() + self._deadline_s
        got: Msg | Reply | None = None
        try:
            while got is None:
                got = await self._once()
        finally:
            if self._waiting and self.presence is not None:
                self.presence.stop_waiting(self.agent)
        if isinstance(got, Reply):
            return got
        if self.presence is not None:
            self.presence.mark_present(self.agent)
        latency = (time.perf_counter() - self._sent) * 1000
        move, reason, detail = check_reply(self._turn, got.data, got.headers)
        return Reply(move, reason, detail, latency)

    def _epoch(self) -> tuple[int, bool]:
        return int(self.nc.stats.get("reconnects", 0)), bool(self.nc.is_connected)

    def _check_bus(self, epoch: tuple[int, bool], doing: str) -> None:
        """`MatchAborted` when the connection dropped (or was replaced) since `epoch` was taken."""
        now = self._epoch()
        if now[0] != epoch[0] or not now[1] or self.nc.is_closed:
            raise MatchAborted(f"NATS connection lost while {doing} {self.agent}") from None

    async def _once(self) -> Msg | Reply | None:
        """One request: the reply message, a fault, or None (nobody listened: ask again)."""
        loop = asyncio.get_running_loop()
        epoch = self._epoch()
        t0 = loop.time()
        self._sent = time.perf_counter()
        timeout = max(self._end - t0, 0.001)
        if self._asked:
            # Asked again: `sent_at + deadline_ms` must still name the referee's own end
            # (later than the first ask's while a known-absent agent is waited for).
            self._turn = self._turn.stamped(time.time() + timeout - self._deadline_s)
        # A timer at the true deadline measures how late our own loop was there; the request
        # itself waits LAG_TOLERANCE_S longer, so a reply that sat unread in the socket while
        # the referee stalled is still read (and judged by `read_late`) instead of dropped.
        lag_at_end: list[float] = []
        at_end = loop.call_at(self._end, _note_lateness, loop, self._end, lag_at_end)
        try:
            msg = await self.nc.request(self.subject, self._turn.data, timeout=timeout + LAG_TOLERANCE_S)
        except nats.errors.NoRespondersError:
            self._asked += 1
            self._check_bus(epoch, "asking")
            return await self._no_responder()
        except (nats.errors.TimeoutError, TimeoutError):
            self._check_bus(epoch, "waiting for")
            late = max(loop.time() - t0 - timeout - LAG_TOLERANCE_S, *lag_at_end, 0.0)
            if late > LAG_TOLERANCE_S:
                raise RefereeLag(late) from None
            return self._timeout("")
        except nats.errors.MaxPayloadError as exc:
            return Reply(None, "error", f"request too large for the server: {exc}", 0.0)
        except BUS_ERRORS as exc:
            raise MatchAborted(f"NATS connection failed while asking {self.agent}: {exc!r}") from exc
        finally:
            at_end.cancel()
        read_at = loop.time()
        if read_late(read_at, self._end, lag_at_end[0] if lag_at_end else None):
            return self._timeout(f" (a reply came {(read_at - self._end) * 1000:.0f} ms after the deadline)")
        return msg

    def _timeout(self, note: str) -> Reply:
        return Reply(None, "timeout", f"no reply within {self.deadline_ms} ms{note}", self.deadline_ms)

    async def _no_responder(self) -> Reply | None:
        """Nobody listens: back off and ask again (None) until the deadline, waiting longer for an
        agent known absent within the presence limit; then the `no_responder` fault."""
        now = asyncio.get_running_loop().time()
        if now + self._backoff >= self._end:
            left = 0.0 if self.presence is None else self.presence.wait_for(self.agent)
            if self.presence is None or left <= 0:
                return Reply(
                    None,
                    "no_responder",
                    f"no agent listens on {self.subject} "
                    f"(asked {self._asked} times over {self.deadline_ms} ms)",
                    0.0,
                )
            # A known-absent agent within the presence limit: wait for it, not for its deadline.
            self._end = now + self._backoff + min(self._deadline_s, left)
            if not self._waiting:
                # Counted for the whole wait, so the worker parks the agent's other matches.
                self._waiting = True
                self.presence.start_waiting(self.agent)
        await asyncio.sleep(self._backoff)
        self._backoff = min(self._backoff * 2, NO_RESPONDER_BACKOFF_S[1])
        return None


# A seat answered in the referee's own process: the turn in, its move out (an exception: the seat's
# error, as an agent's service error).
LocalSeat = Callable[[Turn], Awaitable[Move]]


async def ask_local(seat: LocalSeat, turn: Turn, deadline_ms: int) -> Reply:
    """`seat`'s move on `turn`, an `error` when it raised, or a `timeout` when none came within
    `deadline_ms`."""
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(deadline_ms / 1000):
            move = await seat(turn)
    except TimeoutError:
        return Reply(None, "timeout", f"no reply within {deadline_ms} ms", deadline_ms)
    except Exception as exc:
        detail = f"agent error: {type(exc).__name__}: {exc}"[:MAX_DETAIL]
        return Reply(None, "error", detail, (time.perf_counter() - t0) * 1000)
    latency = (time.perf_counter() - t0) * 1000
    wrong = wrong_turn(turn, move)
    if wrong is not None:
        return Reply(None, "malformed", wrong, latency)
    return Reply(move, None, "", latency)
