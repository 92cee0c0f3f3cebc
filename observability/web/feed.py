"""The spectators' view of the bus: every match, move by move, from `SPIELBUS_MATCHES` events.

`MatchFeed.follow(nc)` replays the stream from its start and then follows it
(a JetStream ordered consumer), so a page opened mid-tournament still shows the
matches that began before it. Only public information is kept while a match is
in progress: `moved` events of private steps arrive as `hidden` with no action;
the `ended` event carries the full record, and only then are its steps revealed.

Standings and ratings are kept per tournament from the `ended` records. Live
ratings are recomputed at most every `ratings_every` seconds, in a worker
thread, with a small bootstrap (the final report of `spielbus run` is the
authoritative one). Limits: at most `max_matches` matches are kept (the oldest
finished ones are dropped first), and the records of at most `max_tournaments`
tournaments; everything lives in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import BaseModel, Field, ValidationError

from bus.protocol import FaultRecord, MatchEvent, MatchRecord, MoveRecord
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee.config import RatingsConfig
from referee.ratings import Rating, Standing, ratings, standings

log = logging.getLogger(__name__)


class Step(BaseModel):
    """One step as a spectator may see it."""

    turn: int
    player: int
    agent: str | None = None
    text: str
    latency_ms: float | None = None
    hidden: bool = False
    forced: bool = False
    tokens: int | None = None

    @classmethod
    def of(cls, move: MoveRecord, hidden: bool = False) -> Step:
        tokens = move.usage.prompt_tokens + move.usage.completion_tokens if move.usage else None
        return cls(
            turn=move.turn,
            player=move.player,
            agent=move.agent,
            text=move.text,
            latency_ms=move.latency_ms,
            hidden=hidden,
            forced=move.forced,
            tokens=tokens or None,
        )


class MatchView(BaseModel):
    match_id: str
    tournament: str
    game: str
    seats: list[str]
    status: Literal["playing", "ended"] = "playing"
    outcome: str | None = None
    returns: list[float] = Field(default_factory=list)
    forfeited: list[int] = Field(default_factory=list)
    steps: list[Step] = Field(default_factory=list)
    faults: list[FaultRecord] = Field(default_factory=list)
    observation: str | None = None
    updated: float = 0.0
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        last = self.steps[-1] if self.steps else None
        return {
            "match_id": self.match_id,
            "tournament": self.tournament,
            "game": self.game,
            "seats": self.seats,
            "status": self.status,
            "outcome": self.outcome,
            "returns": self.returns,
            "moves": sum(1 for s in self.steps if s.player >= 0),
            "faults": len(self.faults),
            "last": last.model_dump() if last else None,
            "updated": self.updated,
        }

    def clocks(self) -> list[dict[str, Any]]:
        """Per seat: moves, total and last thinking time as the referee measured it."""
        out = []
        for seat, agent in enumerate(self.seats):
            mine = [s for s in self.steps if s.player == seat and s.latency_ms is not None]
            out.append(
                {
                    "seat": seat,
                    "agent": agent,
                    "moves": len(mine),
                    "total_ms": round(sum(s.latency_ms or 0.0 for s in mine), 1),
                    "last_ms": mine[-1].latency_ms if mine else None,
                }
            )
        return out


class TournamentTable(BaseModel):
    tournament: str
    standings: list[Standing] = Field(default_factory=list)
    ratings: list[Rating] = Field(default_factory=list)
    matches: int = 0
    updated: float = 0.0


RatingsListener = Callable[[str, list[Rating]], None]


class MatchFeed:
    def __init__(
        self,
        subjects: Subjects | None = None,
        *,
        ratings_config: RatingsConfig | None = None,
        max_matches: int = 300,
        max_tournaments: int = 20,
        ratings_every: float = 2.0,
        on_ratings: RatingsListener | None = None,
    ) -> None:
        self.subjects = subjects or Subjects()
        # A small bootstrap: live intervals are a preview, recomputed often.
        self.ratings_config = ratings_config or RatingsConfig(bootstrap=20)
        self.max_matches = max_matches
        self.max_tournaments = max_tournaments
        self.ratings_every = ratings_every
        self.on_ratings = on_ratings
        self.matches: OrderedDict[str, MatchView] = OrderedDict()
        self.records: OrderedDict[str, list[MatchRecord]] = OrderedDict()
        self.tables: dict[str, TournamentTable] = {}
        self.events_seen = 0
        self._sub: Any = None
        self._dirty: set[str] = set()
        self._rater: asyncio.Task[None] | None = None

    # -- following the bus --------------------------------------------------------------------

    async def follow(self, nc: NATS) -> None:
        """Replay `SPIELBUS_MATCHES` and keep following it until `close()`."""
        js = nc.jetstream()
        await ensure_streams(js, self.subjects)
        self._sub = await js.subscribe(
            f"{self.subjects.prefix}.match.>",
            cb=self._on_msg,
            ordered_consumer=True,
            deliver_policy=DeliverPolicy.ALL,
            stream=self.subjects.matches_stream,
        )
        self._rater = asyncio.create_task(self._rate_loop())

    async def close(self) -> None:
        if self._rater is not None:
            self._rater.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._rater
        if self._sub is not None:
            with contextlib.suppress(Exception):
                await self._sub.unsubscribe()
            self._sub = None

    async def _on_msg(self, msg: Msg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        self.apply(event)

    # -- state --------------------------------------------------------------------------------

    def apply(self, event: MatchEvent) -> None:
        """Fold one event into the view (also usable as an `EventPublisher` listener)."""
        self.events_seen += 1
        view = self.matches.get(event.match_id)
        if view is None:
            view = MatchView(
                match_id=event.match_id,
                tournament=event.tournament,
                game=event.game.label(),
                seats=list(event.seats),
            )
            self.matches[event.match_id] = view
            self._trim()
        view.updated = time.time()
        if event.observation is not None:
            view.observation = event.observation
        if event.type == "moved" and event.move is not None and view.status == "playing":
            view.steps.append(Step.of(event.move, hidden=event.hidden))
        elif event.type == "forfeit" and event.fault is not None and view.status == "playing":
            view.faults.append(event.fault)
        elif event.type == "ended" and event.record is not None and view.status == "playing":
            rec = event.record
            view.status = "ended"
            view.outcome = rec.outcome
            view.returns = list(rec.returns)
            view.forfeited = list(rec.forfeited)
            view.error = rec.error
            # The record is the whole truth: private steps are revealed now that the match is over.
            view.steps = [Step.of(m) for m in rec.moves]
            view.faults = list(rec.faults)
            self._add_record(rec)

    def _trim(self) -> None:
        while len(self.matches) > self.max_matches:
            victim = next((k for k, v in self.matches.items() if v.status == "ended"), None)
            if victim is None:
                break
            del self.matches[victim]

    def _add_record(self, rec: MatchRecord) -> None:
        recs = self.records.setdefault(rec.tournament, [])
        recs.append(rec)
        self.records.move_to_end(rec.tournament)
        while len(self.records) > self.max_tournaments:
            old, _ = self.records.popitem(last=False)
            self.tables.pop(old, None)
        table = self.tables.setdefault(rec.tournament, TournamentTable(tournament=rec.tournament))
        table.standings = standings(recs)
        table.matches = len(recs)
        table.updated = time.time()
        self._dirty.add(rec.tournament)

    async def _rate_loop(self) -> None:
        while True:
            await asyncio.sleep(self.ratings_every)
            await self.rate_now()

    async def rate_now(self) -> None:
        """Recompute the ratings of tournaments with new records (in a thread: bootstrap is CPU)."""
        dirty, self._dirty = self._dirty, set()
        for tid in dirty:
            recs = list(self.records.get(tid, []))
            if not recs:
                continue
            try:
                rates = await asyncio.to_thread(ratings, recs, self.ratings_config, 0)
            except Exception:
                log.warning("live ratings of %s failed", tid, exc_info=True)
                continue
            table = self.tables.get(tid)
            if table is not None:
                table.ratings = rates
            if self.on_ratings is not None:
                self.on_ratings(tid, rates)

    # -- queries ------------------------------------------------------------------------------

    def tournaments(self) -> list[str]:
        seen: dict[str, float] = {}
        for v in self.matches.values():
            seen[v.tournament] = max(seen.get(v.tournament, 0.0), v.updated)
        return sorted(seen, key=lambda t: -seen[t])

    def list_matches(self, tournament: str | None = None) -> list[dict[str, Any]]:
        views = [v for v in self.matches.values() if tournament in (None, "", v.tournament)]
        # In progress first, then the most recently finished.
        views.sort(key=lambda v: (v.status != "playing", -v.updated if v.status == "ended" else 0.0))
        return [v.summary() for v in views]

    def table(self, tournament: str | None = None) -> TournamentTable | None:
        tid = tournament or next(iter(self.tournaments()), None)
        if tid is None:
            return None
        return self.tables.get(tid) or TournamentTable(tournament=tid)
