"""The ladder service: watch the pool, schedule the most informative matches, count each result once.

`Ladder(nc, config).run()` loops until `stop()`:

1. Asks the pool (referee/ladder/pool.py) who of the ladder file's agents (and, given
   `registered`, the bots registered at run time: bus/registry.py) is on the bus, under which
   entry (name@provenance: a changed prompt or model is a new entry). Under accounts only the
   holder of `agent-<name>`'s login can answer for `<name>` (bus/identity.py).
2. Picks pairings by information (referee/ladder/matchmaking.py) among the present, not benched
   (referee/ladder/quarantine.py) entries that play the game, only entries of one budget class
   together (config.budget_class), within each agent's concurrency,
   the ladder's concurrency and its rate limit (a token bucket of `rate_per_minute`, burst
   `concurrency`), and publishes their specs to the referees' work queue (`SPIELBUS_SCHEDULE`,
   the match id as `Nats-Msg-Id`). Each is first stored as `pending.<match id>` in the ladder's
   key-value bucket (referee/ladder/store.py).
3. Counts a match when its `ended` record arrives (a plain subscription for promptness, and a
   look at the stored `ended` event of each pending match every round, so a record published
   while the ladder was away or disconnected is not missed), checked against the spec like every
   collector does (referee/acceptance.py). The result is written with `create` under its match
   id, so a record seen twice, or by a restarted ladder, counts once.

A restarted ladder reads its results and pending matches from the bucket: a pending match whose
record is stored is counted; one without is sent again (deduplicated by match id within the
stream's window; a referee skips a spec whose record is already stored). A referee killed
mid-match leaves its spec to be redelivered by JetStream to another referee.

Games of more than two players are scheduled in groups (`_groups`: the most uncertain entry by
openskill's sigma with the closest in mu) and rated by openskill's Plackett-Luce beside
Bradley-Terry (referee/ladder/board.py).

Limits: the N-player grouping is a heuristic, not the information-gain planning of two-player
games (referee/ladder/matchmaking.py); the quarantine is kept in the bucket (`bench.<entry>`: a
restarted ladder keeps its benches), the rate limiter in memory (a restart starts with a full
burst); a pending match without a record after
`pending_timeout_s` is given up uncounted; so is a spec whose publish was stored by JetStream but
whose ack never came back through an outage (it is played, not counted). Scheduling is one round
per `probe_s` or per counted result, whichever is first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from bus.protocol import MatchEvent, MatchRecord, MatchSpec
from bus.streams import ensure_streams, publish_stored
from bus.subjects import Subjects
from games.probe import check_game
from referee.acceptance import record_problem
from referee.config import ConfigError
from referee.ladder.board import BoardRow, board
from referee.ladder.config import LadderConfig
from referee.ladder.matchmaking import next_pairings
from referee.ladder.pool import Pool
from referee.ladder.quarantine import BenchState, Quarantine
from referee.ladder.store import (
    LadderResult,
    LadderStore,
    Pending,
    from_group_record,
    from_record,
    win_counts,
)
from referee.wake import any_set

log = logging.getLogger(__name__)


def check_ladder_games(config: LadderConfig) -> dict[str, int]:
    """Every game starts (ConfigError naming the one that does not); label -> its player count."""
    out = {}
    for i, game in enumerate(config.games):
        try:
            out[game.label()] = check_game(game)
        except Exception as exc:
            raise ConfigError(f"games[{i}] ({game.label()}): {exc}") from exc
    return out


class RateLimit:
    """A token bucket: `rate_per_minute` matches, at most `burst` at once."""

    def __init__(self, rate_per_minute: float, burst: int, now: float) -> None:
        self.rate = rate_per_minute / 60.0
        self.burst = float(burst)
        self.tokens = float(burst)
        self.at = now

    def available(self, now: float) -> int:
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        return int(self.tokens)

    def take(self) -> None:
        self.tokens -= 1.0


class Ladder:
    def __init__(
        self,
        nc: NATS,
        config: LadderConfig,
        *,
        subjects: Subjects | None = None,
        clock: Callable[[], float] = time.time,
        registered: Callable[[], list[str]] | None = None,
    ) -> None:
        self.nc = nc
        # Self-registered bots (bus/registry.py), asked each round beside the file's agents.
        self.registered = registered
        self.config = config
        self.subjects = subjects or Subjects()
        self.clock = clock
        self.pool = Pool(list(config.agents))
        q = config.quarantine
        self.quarantine = Quarantine(q.limit, q.backoff_s, max(q.max_backoff_s, q.backoff_s))
        self.limiter = RateLimit(config.rate_per_minute, config.concurrency, clock())
        self.store: LadderStore | None = None
        self.results: list[LadderResult] = []
        self.pending: dict[str, Pending] = {}
        self.scheduled = 0  # specs this process published
        self.counted = 0  # results this process counted
        self.rows: list[BoardRow] = []  # the leaderboard as of the last counted result
        self.on_board: list[Callable[[list[BoardRow]], None]] = []
        self.ready = asyncio.Event()  # set once the bucket is read and the loop runs
        self._stop = asyncio.Event()
        self._wake = asyncio.Event()
        self._rng = random.Random()
        self._rows_task: asyncio.Task[None] | None = None
        self._rows_dirty = False
        self.players: dict[str, int] = {}  # game label -> players per match (set by `run`)

    # -- the loop ---------------------------------------------------------------------------

    async def run(self) -> None:
        self.players = check_ladder_games(self.config)
        js = self.nc.jetstream()
        await ensure_streams(js, self.subjects)
        self.store = await LadderStore.open(js, self.config.bucket)
        self.results = await self.store.results()
        self.pending = {p.spec.match_id: p for p in await self.store.pending()}
        for entry, state in (await self.store.benches()).items():
            self.quarantine.restore(entry, state)
        log.info(
            "ladder %s: %d results and %d pending matches in %s",
            self.config.name,
            len(self.results),
            len(self.pending),
            self.config.bucket,
        )
        self._refresh_rows()
        sub: Subscription = await self.nc.subscribe(self.subjects.match_all("ended"), cb=self._on_ended)
        try:
            await self._resume()
            self.ready.set()
            while not self._stop.is_set():
                await self._round()
                self._wake.clear()
                await any_set([self._stop, self._wake], self.config.probe_s)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            if self._rows_task is not None:
                with contextlib.suppress(Exception):
                    await self._rows_task

    def stop(self) -> None:
        self._stop.set()

    async def _round(self) -> None:
        if self.registered is not None:
            try:
                names = self.registered()
            except Exception:  # a registry mid-write or unreadable: keep the last pool's names
                log.warning("ladder: reading the registered bots failed", exc_info=True)
            else:
                self.pool.allowed = list(dict.fromkeys([*self.config.agents, *names]))
        try:
            joined, left = await self.pool.update(self.nc, wait_s=min(2.0, self.config.probe_s))
        except Exception:  # the bus away: keep the last pool, try again next round
            log.warning("ladder: probing the pool failed", exc_info=True)
            joined, left = [], []
        for m in joined:
            log.info("ladder: %s joined as %s", m.name, m.entry)
        for m in left:
            log.info("ladder: %s (%s) left", m.name, m.entry)
        try:
            await self._sweep()
            await self._schedule()
        except Exception:
            # The bus away mid-round (a KV write or a publish that ran out of retries): the state
            # in the bucket is consistent (see `_submit`), so the next round simply goes on.
            log.warning("ladder: a round failed; trying again next round", exc_info=True)

    # -- scheduling ---------------------------------------------------------------------------

    def _busy(self) -> Counter[str]:
        return Counter(s for p in self.pending.values() for s in p.spec.seats)

    def _firsts(self, game: str) -> Counter[str]:
        c: Counter[str] = Counter(r.first for r in self.results if r.game == game)
        c.update(p.entries[p.spec.seats[0]] for p in self.pending.values() if p.spec.game.label() == game)
        return c

    async def _schedule(self) -> None:
        now = self.clock()
        room = min(self.config.concurrency - len(self.pending), self.limiter.available(now))
        if room <= 0:
            return
        busy = self._busy()
        members = {m.name: m for m in self.pool.members.values() if self.quarantine.schedulable(m.entry, now)}
        # A registered bot (not in the file) plays one match at a time.
        slots = {
            m.entry: (a.concurrency if (a := self.config.agents.get(n)) else 1) - busy[n]
            for n, m in members.items()
        }
        games = list(self.config.games)
        # Rotate which game goes first so one game cannot take every free slot for ever.
        start = self.scheduled % len(games)
        for game in games[start:] + games[:start]:
            if room <= 0:
                break
            label = game.label()
            plays = [m for m in members.values() if "*" in m.games or game.name in m.games]
            entries = {m.entry: m.name for m in plays}
            limit = max(1, -(-room // len(games))) if len(games) > 1 else room
            n = self.players.get(label, 2)
            classes = {e: self.config.budget_class(name) for e, name in entries.items()}
            if n == 2:
                pairings = next_pairings(
                    list(entries),
                    win_counts(self.results, label),
                    slots,
                    self._firsts(label),
                    limit,
                    classes=classes,
                )
                groups = [[p.first, p.second] for p in pairings]
            else:
                groups = self._groups(label, list(entries), n, slots, limit, classes)
            for group in groups:
                await self._submit(label, [entries[e] for e in group], {entries[e]: e for e in group})
                for e in group:
                    slots[e] -= 1
                room -= 1
                self.limiter.take()

    def _groups(
        self,
        label: str,
        entries: list[str],
        n: int,
        slots: dict[str, int],
        limit: int,
        classes: dict[str, str],
    ) -> list[list[str]]:
        """Groups of `n` for a game of more than two players: the most uncertain entry (openskill's
        sigma; unrated first) with the `n - 1` closest in mu of its budget class that have a free
        slot, seats shuffled."""
        mu: dict[str, float] = {e: 25.0 for e in entries}  # openskill's defaults for the unrated
        sigma: dict[str, float] = {e: 25 / 3 for e in entries}
        for r in self.rows:
            if r.game == label and r.entry in mu and r.pl_mu is not None and r.pl_sigma is not None:
                mu[r.entry], sigma[r.entry] = r.pl_mu, r.pl_sigma
        free = dict(slots)
        out: list[list[str]] = []
        while len(out) < limit:
            ready = sorted((e for e in entries if free.get(e, 0) > 0), key=lambda e: -sigma[e])
            # The most uncertain entry whose budget class has n - 1 others with a free slot.
            found = None
            for anchor in ready:
                peers = [e for e in ready if e != anchor and classes.get(e) == classes.get(anchor)]
                if len(peers) >= n - 1:
                    found = anchor, peers
                    break
            if found is None:
                break
            anchor, peers = found
            group = [anchor, *sorted(peers, key=lambda e: abs(mu[e] - mu[anchor]))[: n - 1]]
            self._rng.shuffle(group)
            for e in group:
                free[e] -= 1
            out.append(group)
        return out

    async def _submit(self, label: str, seats: list[str], entries: dict[str, str]) -> None:
        assert self.store is not None
        game = next(g for g in self.config.games if g.label() == label)
        spec = self.config.spec(
            self.config.new_match_id(), self.config.name, game, seats, self._rng.randrange(2**31)
        )
        pending = Pending(spec=spec, entries=entries, scheduled_at=self.clock())
        # Stored before it is sent: a ladder killed in between sends it again on restart.
        await self.store.add_pending(pending)
        self.pending[spec.match_id] = pending
        try:
            await self._publish(spec)
        except Exception:
            # Not sent: forget it here; a pending key left in the bucket is sent again by the
            # next start (`_resume`), or given up after `pending_timeout_s`.
            self.pending.pop(spec.match_id, None)
            with contextlib.suppress(Exception):
                await self.store.drop_pending(spec.match_id)
            raise
        self.scheduled += 1
        log.info("ladder: scheduled %s: %s (%s)", spec.match_id, " vs ".join(seats), label)

    async def _publish(self, spec: MatchSpec) -> None:
        await publish_stored(
            self.nc.jetstream(), self.subjects.schedule, spec.model_dump_json().encode(), spec.match_id
        )

    # -- results ------------------------------------------------------------------------------

    async def _on_ended(self, msg: Msg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        pending = self.pending.get(event.match_id)
        if pending is None:
            return
        await self._accept(pending, event)

    async def _accept(self, pending: Pending, event: MatchEvent) -> bool:
        problem = record_problem(pending.spec, event)
        if problem is not None:
            log.warning("ladder: ignoring an ended event for %s: %s", event.match_id, problem)
            return False
        assert event.record is not None
        await self._count(pending, event.record)
        return True

    async def _count(self, pending: Pending, record: MatchRecord) -> None:
        assert self.store is not None
        mid = pending.spec.match_id
        if mid not in self.pending:
            return  # counted already (the subscription and the sweep both saw it)
        if len(pending.spec.seats) > 2:
            result = from_group_record(record, pending.entries)
        else:
            result = from_record(record, entries=pending.entries)
        if result is not None and await self.store.record(result):
            self.results.append(result)
            self.counted += 1
            now = self.clock()
            for entry in dict.fromkeys(result.seats or [result.first, result.second]):
                state = self.quarantine.result(entry, result.faults.get(entry), now)
                if state is not None:
                    await self._put_bench(entry, state)
            self._refresh_rows()
        elif result is None:
            log.warning("ladder: match %s ended %s: not rated", mid, record.outcome)
        self.pending.pop(mid, None)
        await self.store.drop_pending(mid)
        self._wake.set()

    async def _put_bench(self, entry: str, state: BenchState) -> None:
        assert self.store is not None
        try:
            await self.store.put_bench(entry, state)
        except Exception:  # the bus away: the bench holds in memory; a restart may forget this one
            log.warning("ladder: storing the quarantine state of %s failed", entry, exc_info=True)

    async def _stored_ended(self, spec: MatchSpec) -> MatchEvent | None:
        try:
            msg = await self.nc.jetstream().get_last_msg(
                self.subjects.matches_stream, self.subjects.match(spec.match_id, "ended")
            )
            return MatchEvent.model_validate_json(msg.data or b"")
        except Exception:  # none stored (or the bus away): the caller decides
            return None

    async def _resume(self) -> None:
        """Pending matches of an earlier run: count the recorded ones, send the others again."""
        for pending in list(self.pending.values()):
            event = await self._stored_ended(pending.spec)
            if event is not None and await self._accept(pending, event):
                continue
            await self._publish(pending.spec)
            log.info("ladder: sent pending match %s again", pending.spec.match_id)

    async def _sweep(self) -> None:
        """Count pending matches whose record is stored (missed by the subscription); give up
        those older than `pending_timeout_s`."""
        now = self.clock()
        for pending in list(self.pending.values()):
            event = await self._stored_ended(pending.spec)
            if event is not None and await self._accept(pending, event):
                continue
            if now - pending.scheduled_at > self.config.pending_timeout_s:
                mid = pending.spec.match_id
                log.warning(
                    "ladder: match %s has no record after %.0f s: given up", mid, now - pending.scheduled_at
                )
                self.pending.pop(mid, None)
                if self.store is not None:
                    await self.store.drop_pending(mid)

    # -- the leaderboard ----------------------------------------------------------------------

    def _refresh_rows(self) -> None:
        """Re-rate off the loop; one computation at a time, again if results came in meanwhile."""
        self._rows_dirty = True
        if self._rows_task is None or self._rows_task.done():
            self._rows_task = asyncio.create_task(self._rerate())

    async def _rerate(self) -> None:
        while self._rows_dirty:
            self._rows_dirty = False
            try:
                self.rows = await asyncio.to_thread(board, list(self.results))
            except Exception:
                log.warning("ladder: rating failed", exc_info=True)
                return
            for cb in self.on_board:
                try:
                    cb(self.rows)
                except Exception:
                    log.warning("ladder: a leaderboard listener failed", exc_info=True)

    def leaderboard(self) -> dict[str, Any]:
        """What the live page shows: the rows with live status (in the pool, benched and why)."""
        now = self.clock()
        benched = self.quarantine.benched(now)
        present = {m.entry for m in self.pool.members.values()}
        busy = self._busy()
        rows = [
            {
                **r.model_dump(),
                "present": r.entry in present,
                "playing": busy[r.name] if r.entry in present else 0,
                "budget": self.config.budget_class(r.name),
                "benched": benched.get(r.entry, ""),
            }
            for r in self.rows
        ]
        rated = {r.entry for r in self.rows}
        waiting = [
            {
                "entry": m.entry,
                "name": m.name,
                "budget": self.config.budget_class(m.name),
                "benched": benched.get(m.entry, ""),
            }
            for m in self.pool.members.values()
            if m.entry not in rated
        ]
        return {
            "ladder": self.config.name,
            "rows": rows,
            "unrated": waiting,
            "pending": len(self.pending),
            "results": len(self.results),
        }
