"""The spectators' view of the bus: every match, move by move, from `SPIELBUS_MATCHES` events.

`MatchFeed.follow(nc)` starts from recent state, not from the beginning of the
stream: it replays at most the last `replay_events` stored events (default 2,000; 0:
only new ones) and then follows the stream (a JetStream ordered consumer). `moved`
events are not stored (`bus.streams`): they are followed on a plain subscription, so
a match in flight shows the moves made since the page started following, and all of
them once its `ended` record arrives. The two deliveries are not ordered with each
other: a `moved` event may come before its match's `started`, and a `started` seen
after moves does not reset the view. A page opened mid-tournament therefore shows the
matches in flight and the recent ones, while a bus holding a week of events costs the
referee nothing at start. Only
public information is kept while a match is in progress: `moved` events of
private steps arrive as `hidden` with no action; the `ended` event carries the
full record, and only then are its steps revealed. An analyst's verdicts (`move_verdict` on
`spielbus.analysis.<match_id>`, `spielbus analyst`) are followed on a plain subscription too and
kept with their match by turn, for the page's evaluation bar.

Standings are folded per tournament, one `ended` record at a time (constant work
per event, whatever the tournament's length); only the pairwise comparisons the
ratings need are kept, never the full records. Live ratings are the run report's
(`referee.ratings.PairTally`: the same functions, records rated in the same order
whatever order they arrive in, so once every record is in they equal the report's)
and are computed on demand: when the page asks for standings or Prometheus scrapes,
at most once per `ratings_every` seconds per tournament, in a worker thread,
never on a timer on the referee's loop.

Limits: at most `max_matches` match views are kept (the oldest finished ones are
dropped first) and the tables of at most `max_tournaments` tournaments; standings
of a tournament that began before the replayed window count only what the window
and later events hold. Everything lives in memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import ConsumerConfig, DeliverPolicy
from pydantic import BaseModel, Field, ValidationError

from bus.protocol import FaultRecord, LLMCall, MatchEvent, MatchRecord, MoveRecord, MoveVerdict
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee.config import RatingsConfig
from referee.ratings import PairTally, Rating, Standing, StandingsTable

log = logging.getLogger(__name__)


class Step(BaseModel):
    """One step as a spectator may see it."""

    turn: int
    player: int
    agent: str | None = None
    text: str
    action: int | None = None  # None while the step is hidden from spectators
    latency_ms: float | None = None
    hidden: bool = False
    forced: bool = False
    tokens: int | None = None
    # The move's LLM calls as the event carried them: without their thinking and answer texts while
    # an imperfect-information match is played (referee/match.py), whole once it ended.
    calls: list[LLMCall] | None = None

    @classmethod
    def of(cls, move: MoveRecord, hidden: bool = False) -> Step:
        tokens = move.usage.prompt_tokens + move.usage.completion_tokens if move.usage else None
        return cls(
            calls=None if hidden else move.calls,
            turn=move.turn,
            player=move.player,
            agent=move.agent,
            text=move.text,
            action=None if hidden else move.action,
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
    training: bool = False  # played through a training environment (docs/env.md), from the record
    voided: int = 0  # plays voided by a provider fault and started again (referee/worker.py)
    # The analyst's verdicts (`move_verdict`, `spielbus analyst`) by the step's turn: the page's
    # evaluation bar and move classes. Kept across the `ended` record's rebuild of the steps.
    verdicts: dict[int, MoveVerdict] = Field(default_factory=dict)

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
            "training": self.training,
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


class RatingPoint(BaseModel):
    """The tournament's Elo after `matches` records, as one ratings computation gave it."""

    matches: int
    elo: dict[str, float]


class TournamentTable(BaseModel):
    tournament: str
    standings: list[Standing] = Field(default_factory=list)
    ratings: list[Rating] = Field(default_factory=list)
    matches: int = 0
    updated: float = 0.0
    fallback_threshold: float = Field(
        default=0.05, description="fallback share above which the page marks an agent (the run's setting)"
    )
    history: list[RatingPoint] = Field(
        default_factory=list, description="the ratings computed so far, oldest first (at most HISTORY_POINTS)"
    )


HISTORY_POINTS = 500


RatingsListener = Callable[[str, list[Rating]], None]


class _Tally:
    """What the feed keeps of one tournament: folded standings and the comparisons ratings need."""

    def __init__(self, tournament: str, cfg: RatingsConfig) -> None:
        self.tournament = tournament
        self.standings = StandingsTable(cfg.count_provider_faults)
        self.pairs = PairTally(cfg)
        self.matches = 0
        self.updated = 0.0
        self.rows: list[Standing] | None = None  # standings rows, rebuilt when asked after a change
        self.ratings: list[Rating] = []
        self.rated_matches = -1  # `matches` when the ratings were last computed
        self.rated_at = 0.0
        self.history: list[RatingPoint] = []  # for the page's chart: the ratings as computed
        self.lock = threading.Lock()  # one ratings computation at a time


class MatchFeed:
    def __init__(
        self,
        subjects: Subjects | None = None,
        *,
        ratings_config: RatingsConfig | None = None,
        max_matches: int = 300,
        max_tournaments: int = 20,
        ratings_every: float = 2.0,
        replay_events: int = 2000,
        on_ratings: RatingsListener | None = None,
        fallback_threshold: float = 0.05,
    ) -> None:
        self.subjects = subjects or Subjects()
        self.fallback_threshold = fallback_threshold
        self.ratings_config = ratings_config or RatingsConfig()
        self.max_matches = max_matches
        self.max_tournaments = max_tournaments
        self.ratings_every = ratings_every
        self.replay_events = max(0, replay_events)
        self.on_ratings = on_ratings
        self.matches: OrderedDict[str, MatchView] = OrderedDict()
        self.tallies: OrderedDict[str, _Tally] = OrderedDict()
        self.events_seen = 0
        self._sub: Any = None
        self._moves_sub: Any = None
        self._verdicts_sub: Any = None
        self._pending: set[asyncio.Task[Any]] = set()

    # -- following the bus --------------------------------------------------------------------

    async def follow(self, nc: NATS) -> None:
        """Replay the recent end of `SPIELBUS_MATCHES` and keep following it until `close()`."""
        js = nc.jetstream()
        await ensure_streams(js, self.subjects)
        config = ConsumerConfig(deliver_policy=DeliverPolicy.NEW)
        if self.replay_events:
            state = (await js.stream_info(self.subjects.matches_stream)).state
            if state.messages:
                start = max(state.first_seq, state.last_seq - self.replay_events + 1)
                config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=start)
        # Moves first: a move must not be missed between the replay's end and the live follow.
        self._moves_sub = await nc.subscribe(self.subjects.match_all("moved"), cb=self._on_msg)
        self._verdicts_sub = await nc.subscribe(self.subjects.analysis_all(), cb=self._on_verdict)
        self._sub = await js.subscribe(
            f"{self.subjects.prefix}.match.>",
            cb=self._on_msg,
            ordered_consumer=True,
            config=config,
            stream=self.subjects.matches_stream,
        )

    async def close(self) -> None:
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)
        for sub in (self._sub, self._moves_sub, self._verdicts_sub):
            if sub is not None:
                with contextlib.suppress(Exception):
                    await sub.unsubscribe()
        self._sub = self._moves_sub = self._verdicts_sub = None

    async def _on_msg(self, msg: Msg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        self.apply(event)

    async def _on_verdict(self, msg: Msg) -> None:
        try:
            verdict = MoveVerdict.model_validate_json(msg.data)
        except ValidationError:
            return
        self.apply_verdict(verdict)

    # -- state --------------------------------------------------------------------------------

    def apply_verdict(self, verdict: MoveVerdict) -> None:
        """Keep an analyst's verdict with its match (only for a match this page shows)."""
        view = self.matches.get(verdict.match_id)
        if view is not None and len(view.verdicts) < 10_000:
            view.verdicts[verdict.turn] = verdict
            view.updated = time.time()

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
        if event.observation is not None and not (event.type == "started" and view.steps):
            view.observation = event.observation
        if (
            event.type == "started"
            and view.status == "playing"
            and view.faults
            and view.faults[-1].reason == "provider"
        ):
            # A play voided by its provider's fault starts again from the first move.
            view.voided += 1
            view.steps, view.faults = [], []
        elif event.type == "moved" and event.move is not None and view.status == "playing":
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
            view.training = bool(rec.training)
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
        """Constant work per record (its own size): fold standings, keep its comparisons."""
        tally = self.tallies.get(rec.tournament)
        if tally is None:
            tally = self.tallies[rec.tournament] = _Tally(rec.tournament, self.ratings_config)
        self.tallies.move_to_end(rec.tournament)
        while len(self.tallies) > self.max_tournaments:
            self.tallies.popitem(last=False)
        tally.standings.add(rec)
        tally.pairs.add_record(rec)
        tally.matches += 1
        tally.updated = time.time()
        tally.rows = None

    # -- ratings, on demand -------------------------------------------------------------------

    def _stale(self, tally: _Tally, force: bool) -> bool:
        if tally.rated_matches == tally.matches:
            return False
        return force or tally.rated_matches < 0 or time.monotonic() - tally.rated_at >= self.ratings_every

    def compute_ratings(self, tournament: str, *, force: bool = False) -> list[Rating]:
        """The tournament's ratings, recomputed if new records arrived and the last computation is
        at least `ratings_every` old (or `force`). Blocking (numpy): call it off the event loop."""
        tally = self.tallies.get(tournament)
        if tally is None:
            return []
        with tally.lock:
            if not self._stale(tally, force):
                return tally.ratings
            matches = tally.matches
            try:
                # Costs the number of agents and of distinct results, not of matches; reads copies
                # (the loop may fold a record meanwhile).
                rates = tally.pairs.ratings()
            except Exception:
                log.warning("live ratings of %s failed", tournament, exc_info=True)
                return tally.ratings
            tally.ratings, tally.rated_matches, tally.rated_at = rates, matches, time.monotonic()
            tally.history.append(RatingPoint(matches=matches, elo={r.agent: r.elo for r in rates}))
            del tally.history[:-HISTORY_POINTS]
        if self.on_ratings is not None:
            self.on_ratings(tournament, rates)
        return rates

    def refresh_latest(self) -> None:
        """Ratings of the most recently updated tournament, if stale (the metrics' scrape hook;
        runs in the scrape thread)."""
        latest = next(reversed(self.tallies), None)
        if latest is not None:
            self.compute_ratings(latest)

    async def rate_now(self) -> None:
        """Recompute, in a thread, the ratings of every tournament with new records."""
        for tid in list(self.tallies):
            await asyncio.to_thread(self.compute_ratings, tid, force=True)

    def _rate_soon(self, tournament: str) -> None:
        """Start a background recomputation if one is due and none is running."""
        tally = self.tallies.get(tournament)
        if tally is None or not self._stale(tally, False) or tally.lock.locked() or self._pending:
            return
        with contextlib.suppress(RuntimeError):  # no running loop: the caller is not async
            task = asyncio.get_running_loop().create_task(asyncio.to_thread(self.compute_ratings, tournament))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

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
        tally = self.tallies.get(tid)
        if tally is None:
            return TournamentTable(tournament=tid)
        if tally.rows is None:
            tally.rows = tally.standings.rows()
        # Asking is what makes live ratings worth computing (the answer carries the last ones).
        self._rate_soon(tid)
        return TournamentTable(
            tournament=tid,
            standings=tally.rows,
            ratings=tally.ratings,
            matches=tally.matches,
            updated=tally.updated,
            fallback_threshold=self.fallback_threshold,
            history=list(tally.history),
        )
