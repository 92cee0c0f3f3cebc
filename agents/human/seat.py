"""A person's seat: the turns waiting for a human player, and the small web app they play from.

The `human` agent kind (`agents.human`) is an ordinary agent service on the bus; its strategy
parks each turn here (`Seat.wait`) until the player's browser answers or the turn's clock runs
out. The referee cannot tell it from any other agent: same deadline, same faults.

Routes (served by the human agent process itself, on its own port):

    GET  /             the seat page (HTML + JavaScript; shows nothing until given the token)
    GET  /api/seat     the turns waiting for this seat and the recent results   (token)
    POST /api/move     {"match_id": ..., "turn": N, "action": ID}               (token)
    GET  /healthz      "ok"

Trust: the seat is bound to one agent name and protected by a random token, sent by the page
in the `X-Seat-Token` header. The token travels in the URL's fragment (`#token=...`), which
browsers never send to a server, and is shown only to whoever started the seat
(`tell_player`): printed when standard output is a terminal, else written to a file readable by
its owner only (mode 0600) whose path is printed, so a log or a pipe never holds it; spectators
of the live page see a link without it. Without the token nothing of the seat is shown (its
turns hold the seat's private view: its cards) and no move is taken. A move must name a turn
that is waiting and one of its legal ids, else it is refused (400/404) and the turn keeps
waiting. Limits: one token per seat (whoever holds it plays), plain HTTP (bind it to 127.0.0.1,
the default, or a trusted network), the latest 20 results kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from agents.human.clicks import click_cells
from agents.human.page import SEAT_PAGE
from bus.auth import write_private
from bus.http import serve_app
from bus.protocol import MatchEnded, MatchStarted, Turn

log = logging.getLogger(__name__)


def url_host(host: str) -> str:
    """The host part of a URL for a listening address. The same rule as `observability.metrics`'s,
    which this module must not import: the human agent process loads no referee code."""
    host = host or "0.0.0.0"
    return f"[{host}]" if ":" in host else host


TOKEN_HEADER = "X-Seat-Token"
# Where a launcher hands the `human` agent process its seat token (so it can print the address).
TOKEN_ENV = "SPIELBUS_SEAT_TOKEN"
TOKEN_RE = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
MAX_RESULTS = 20
MAX_PLAYING = 200
MAX_BODY = 4096


class SeatError(ValueError):
    """A move the seat refuses; `status` is the HTTP status the page gets."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status


class MoveBody(BaseModel):
    """What the browser posts. Strict: a string id or a float is refused, not coerced."""

    model_config = ConfigDict(extra="forbid", strict=True)
    match_id: str
    turn: int
    action: int


@dataclass
class Waiting:
    turn: Turn
    deadline: float  # time.monotonic(): the referee's deadline, the cap
    answer: asyncio.Future[int]
    cells: dict[int, list[str]]
    arrived: float = 0.0  # time.monotonic()
    move_s: float | None = None  # the person's clock for this move (HumanOptions.move_s)

    def end(self, opened_at: float | None) -> float:
        """When the person's time for this turn is up: `move_s` from when the page first showed
        it (its arrival, or the page's first load if later), never after the referee's deadline;
        without `move_s`, the referee's deadline."""
        if self.move_s is None:
            return self.deadline
        if opened_at is None:  # nobody has seen it yet: only the cap runs
            return self.deadline
        return min(self.deadline, max(self.arrived, opened_at) + self.move_s)


@dataclass
class Seat:
    """The turns of one agent that wait for a person, and how its matches ended."""

    token: str
    agent: str = ""
    waiting: dict[str, Waiting] = field(default_factory=dict)
    playing: dict[str, MatchStarted] = field(default_factory=dict)
    results: deque[dict[str, Any]] = field(default_factory=lambda: deque(maxlen=MAX_RESULTS))
    # When the person's page first loaded (its first authorised poll): the clocks start there.
    opened_at: float | None = None
    opened: asyncio.Event = field(default_factory=asyncio.Event)

    def page_seen(self) -> None:
        if self.opened_at is None:
            self.opened_at = time.monotonic()
            self.opened.set()

    def __post_init__(self) -> None:
        if not TOKEN_RE.match(self.token):
            raise ValueError("a seat token is 16 to 128 letters, digits, '_' or '-'")

    def authorized(self, given: str | None) -> bool:
        return given is not None and hmac.compare_digest(given.encode(), self.token.encode())

    async def wait(self, turn: Turn, deadline: float | None, move_s: float | None = None) -> int:
        """The action id the player chose for `turn`; TimeoutError when the person's time is up
        (`Waiting.end`: `move_s` from when the page first showed the turn, capped by `deadline`;
        without `deadline`, the turn's whole `deadline_ms` from now). Cancellation (the runtime's
        own clock) drops the turn from the page too."""
        end = deadline if deadline is not None else time.monotonic() + turn.deadline_ms / 1000
        key = f"{turn.match_id}/{turn.turn}"
        try:
            cells = click_cells(turn)
        except Exception:  # a picture aid only: the list still works
            log.warning("no board clicks for %s", turn.game.label(), exc_info=True)
            cells = {}
        answer: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        arrived = time.monotonic()
        w = Waiting(turn=turn, deadline=end, answer=answer, cells=cells, arrived=arrived, move_s=move_s)
        self.waiting[key] = w
        try:
            while True:
                left = w.end(self.opened_at) - time.monotonic()
                if left <= 0:
                    raise TimeoutError
                # Until the page first loads, its loading starts the clock: wake up then too.
                waits: set[asyncio.Future[Any]] = {answer}
                opened = None
                if move_s is not None and self.opened_at is None:
                    opened = asyncio.ensure_future(self.opened.wait())
                    waits.add(opened)
                try:
                    await asyncio.wait(waits, timeout=left, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if opened is not None:
                        opened.cancel()
                if answer.done():
                    return answer.result()
        finally:
            self.waiting.pop(key, None)

    def answer(self, body: MoveBody) -> str:
        """Hand the player's move to the waiting turn; the action's text, or SeatError."""
        w = self.waiting.get(f"{body.match_id}/{body.turn}")
        if w is None or w.answer.done():
            raise SeatError(404, "no such turn is waiting (already answered, or its clock ran out)")
        text = next((la.text for la in w.turn.legal_actions if la.id == body.action), None)
        if text is None:
            raise SeatError(400, f"action {body.action} is not a legal action of this turn")
        w.answer.set_result(body.action)
        return text

    def started(self, msg: MatchStarted) -> None:
        self.playing[msg.match_id] = msg
        while len(self.playing) > MAX_PLAYING:  # a lost `match_ended` must not grow it forever
            self.playing.pop(next(iter(self.playing)))

    def ended(self, msg: MatchEnded) -> None:
        head = self.playing.pop(msg.match_id, None)
        self.results.appendleft(
            {
                "match_id": msg.match_id,
                "game": head.game.label() if head else None,
                "seats": head.seats if head else [],
                "seat": msg.seat,
                "returns": msg.returns,
                "outcome": msg.outcome,
            }
        )

    def view(self) -> dict[str, Any]:
        """What the page shows: this seat's own view of each waiting turn, nothing more."""
        now = time.monotonic()
        turns = []
        for key, w in sorted(self.waiting.items(), key=lambda kv: kv[1].end(self.opened_at)):
            t = w.turn
            turns.append(
                {
                    "key": key,
                    "match_id": t.match_id,
                    "game": t.game.label(),
                    "seat": t.seat,
                    "seats": t.seats,
                    "turn": t.turn,
                    "observation": t.observation,
                    "legal": [
                        {"id": la.id, "text": la.text, "cells": w.cells.get(la.id)} for la in t.legal_actions
                    ],
                    "history": [h.model_dump() for h in t.history],
                    "retry": t.retry,
                    "left_ms": max(0, round((w.end(self.opened_at) - now) * 1000)),
                }
            )
        return {
            "agent": self.agent,
            "turns": turns,
            "playing": [
                {"match_id": m.match_id, "game": m.game.label(), "seat": m.seat, "seats": m.seats}
                for m in self.playing.values()
            ],
            "results": list(self.results),
        }


SEAT_KEY = web.AppKey("seat", Seat)

# The page loads nothing from elsewhere; no frame may embed it (a click-jacked move is still a move).
_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


def _seat(request: web.Request) -> Seat:
    seat = request.app[SEAT_KEY]
    if not seat.authorized(request.headers.get(TOKEN_HEADER)):
        raise web.HTTPUnauthorized(
            text='{"error": "this seat needs its token (printed where the seat was started)"}',
            content_type="application/json",
        )
    return seat


async def _index(request: web.Request) -> web.Response:
    return web.Response(text=SEAT_PAGE, content_type="text/html", headers=_HEADERS)


async def _state(request: web.Request) -> web.Response:
    seat = _seat(request)
    seat.page_seen()  # the person's page is open: from now on, their clocks run
    return web.json_response(seat.view(), headers={"Cache-Control": "no-store"})


async def _move(request: web.Request) -> web.Response:
    seat = _seat(request)
    raw = await request.read()
    try:
        body = MoveBody.model_validate_json(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "body"
        return web.json_response({"error": f"{where}: {first.get('msg', 'invalid')}"}, status=400)
    try:
        text = seat.answer(body)
    except SeatError as exc:
        return web.json_response({"error": str(exc)}, status=exc.status)
    log.info("seat %s: %s turn %s: %s", seat.agent, body.match_id, body.turn, text)
    return web.json_response({"ok": True, "text": text})


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_seat_app(seat: Seat) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY)
    app[SEAT_KEY] = seat
    app.router.add_get("/", _index)
    app.router.add_get("/api/seat", _state)
    app.router.add_post("/api/move", _move)
    app.router.add_get("/healthz", _health)
    return app


@dataclass(frozen=True)
class SeatAddress:
    """Where a seat's page is, and its token."""

    host: str
    port: int
    token: str

    @property
    def url(self) -> str:
        """The page without the token: safe to show anyone."""
        return f"http://{url_host(self.host)}:{self.port}/"

    @property
    def private_url(self) -> str:
        """The page with the token in its fragment: for the player only."""
        return f"{self.url}#token={self.token}"


def tell_player(label: str, seat: SeatAddress, terminal: bool, private_file: Path) -> str:
    """The line that tells the seat's address to whoever started it: the address with its token
    when `terminal` (the line goes to a terminal); else the address without it and the path of
    `private_file`, written now (mode 0600) with the whole address, so a log or a pipe never holds
    the token."""
    if terminal:
        return f"{label}: {seat.private_url}"
    write_private(private_file, seat.private_url + "\n")
    return f"{label}: {seat.url} (with its token in {private_file}, readable by you only)"


@dataclass(frozen=True)
class SeatServer(SeatAddress):
    runner: web.AppRunner

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.runner.cleanup()


async def start_seat(seat: Seat, port: int, host: str = "127.0.0.1") -> SeatServer:
    """Serve the seat's page on `port` (0: any free port) in the running event loop."""
    runner, actual = await serve_app(make_seat_app(seat), host, port)
    return SeatServer(runner=runner, host=host, port=actual, token=seat.token)
