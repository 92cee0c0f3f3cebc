"""The live match page: a small aiohttp app over a `MatchFeed`.

Routes (all read-only, no authentication: bind it to a trusted network):

    GET /                       the page (HTML + a little JavaScript that polls the JSON below)
    GET /api/matches            {"tournaments": [...], "matches": [summary, ...]}  (?tournament=ID)
    GET /api/matches/{id}       one match: steps, faults, clocks, public board
    GET /api/matches/{id}/boards  a finished match's board after every step (0: the start), for
                                the page's step-through; 409 while it is playing, 422 for a game
                                it cannot replay (simultaneous moves)
    GET /api/standings          standings and live ratings of a tournament (default: the latest)
    GET /api/ladder             the ladder's leaderboard when this process runs a ladder
                                (`spielbus ladder FILE.toml`; else {"ladder": null})
    GET /api/seats              the human seats of this run: agent and seat page address, never
                                the seat's token (docs/human.md)
    GET /healthz                "ok"

The page never sees more than the feed holds, and the feed holds only public
information until a match has ended (see `observability.web.feed`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from bus.http import serve_app
from games.loader import initial_state, load_game, parse_spec
from observability.metrics import port_free, url_host
from observability.web.feed import MatchFeed, MatchView
from observability.web.page import PAGE

log = logging.getLogger(__name__)

FEED_KEY = web.AppKey("feed", MatchFeed)
SEATS_KEY = web.AppKey("seats", list[dict[str, str]])
LadderBoard = Callable[[], dict[str, object]]


@dataclass(frozen=True)
class _Ladder:
    """The ladder's leaderboard (referee/ladder/service.Ladder.leaderboard), when this process runs one."""

    board: LadderBoard | None


LADDER_KEY = web.AppKey("ladder", _Ladder)


async def _index(request: web.Request) -> web.Response:
    return web.Response(text=PAGE, content_type="text/html")


async def _matches(request: web.Request) -> web.Response:
    feed = request.app[FEED_KEY]
    tid = request.query.get("tournament") or None
    return web.json_response({"tournaments": feed.tournaments(), "matches": feed.list_matches(tid)})


async def _match(request: web.Request) -> web.Response:
    feed = request.app[FEED_KEY]
    view = feed.matches.get(request.match_info["match_id"])
    if view is None:
        return web.json_response({"error": "no such match (or no longer kept)"}, status=404)
    body = view.model_dump(mode="json")
    body["clocks"] = view.clocks()
    body["last"] = body["steps"][-1] if body["steps"] else None
    return web.json_response(body)


def match_boards(view: MatchView) -> list[str]:
    """The text view of a finished match after each of its steps, replayed from the record's
    actions (everything is public once a match has ended). ValueError when it cannot be replayed."""
    if any(s.action is None or s.player == -2 for s in view.steps):
        raise ValueError("this match's steps cannot be replayed one by one (hidden or simultaneous moves)")
    state = initial_state(load_game(parse_spec(view.game)))
    boards = [str(state)]
    for step in view.steps:
        state.apply_action(step.action)
        boards.append(str(state))
    return boards


async def _boards(request: web.Request) -> web.Response:
    feed = request.app[FEED_KEY]
    view = feed.matches.get(request.match_info["match_id"])
    if view is None:
        return web.json_response({"error": "no such match (or no longer kept)"}, status=404)
    if view.status != "ended":
        return web.json_response({"error": "the match is still being played"}, status=409)
    try:
        boards = await asyncio.to_thread(match_boards, view)
    except Exception as exc:  # a game that does not replay: the page shows the final board only
        return web.json_response({"error": str(exc)}, status=422)
    return web.json_response({"match_id": view.match_id, "boards": boards})


async def _standings(request: web.Request) -> web.Response:
    feed = request.app[FEED_KEY]
    table = feed.table(request.query.get("tournament") or None)
    if table is None:
        return web.json_response({"tournament": None, "standings": [], "ratings": [], "matches": 0})
    return web.json_response(table.model_dump(mode="json"))


async def _seats(request: web.Request) -> web.Response:
    return web.json_response({"seats": request.app[SEATS_KEY]})


async def _ladder(request: web.Request) -> web.Response:
    board = request.app[LADDER_KEY].board
    return web.json_response(board() if board is not None else {"ladder": None})


async def _health(request: web.Request) -> web.Response:
    return web.Response(text="ok")


def make_app(
    feed: MatchFeed,
    seats: list[dict[str, str]] | None = None,
    ladder: LadderBoard | None = None,
) -> web.Application:
    app = web.Application()
    app[FEED_KEY] = feed
    app[LADDER_KEY] = _Ladder(ladder)
    app[SEATS_KEY] = seats if seats is not None else []
    app.router.add_get("/", _index)
    app.router.add_get("/api/matches", _matches)
    app.router.add_get("/api/matches/{match_id}", _match)
    app.router.add_get("/api/matches/{match_id}/boards", _boards)
    app.router.add_get("/api/standings", _standings)
    app.router.add_get("/api/seats", _seats)
    app.router.add_get("/api/ladder", _ladder)
    app.router.add_get("/healthz", _health)
    return app


@dataclass
class WebServer:
    runner: web.AppRunner
    port: int
    host: str
    busy: int | None = None  # the port asked for, when it was busy and a free one was taken
    # Human seats shown on the page ({"agent", "url"}, no token); filled by whoever starts them.
    seats: list[dict[str, str]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}/"

    async def stop(self) -> None:
        with contextlib.suppress(Exception):
            await self.runner.cleanup()


async def start_web(
    feed: MatchFeed,
    port: int,
    *,
    host: str = "127.0.0.1",
    fallback: bool = False,
    ladder: LadderBoard | None = None,
) -> WebServer:
    """Serve the page on `port` in the running event loop (0: any free port; with `fallback`, a
    busy port falls back to a free one)."""
    busy = None
    if fallback and port and not port_free(port, host):
        log.info("web port %s is busy; using a free one", port)
        busy, port = port, 0
    seats: list[dict[str, str]] = []
    runner, actual = await serve_app(make_app(feed, seats, ladder), host, port)
    return WebServer(runner=runner, port=actual, host=host, seats=seats, busy=busy)
