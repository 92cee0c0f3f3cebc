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

Identity: each entry's account (`account_of`, bus/identity.py's by default) is what the ladder
benches (referee/ladder/quarantine.py), paces (referee/ladder/pace.py: per pairing of accounts
per hour or in all, per account per minute; never two seats of one account) and audits
(referee/ladder/audit.py, once per `[limits] log_interval_s`, off the loop); a bot that changes
options keeps all three. Each round it also reads the stored bench of every account in the pool,
so an operator's `spielbus ladder bench` holds within a round. What it shows and exports is
bounded by `[limits]` (referee/ladder/bounds.py), and it logs one summary per interval.

Games of more than two players are scheduled in groups (`_groups`: the most uncertain entry by
openskill's sigma with the closest in mu) and rated by openskill's Plackett-Luce beside
Bradley-Terry (referee/ladder/board.py).

Limits: the N-player grouping is a heuristic, not the information-gain planning of two-player
games (referee/ladder/matchmaking.py); the quarantine is kept in the bucket (`bench.<entry>`: a
restarted ladder keeps its benches), the rate limiter in memory (a restart starts with a full
burst); a pending match without a record after
`pending_timeout_s` is given up uncounted; so is a spec whose publish was stored by JetStream but
whose ack never came back through an outage (it is played, not counted). Scheduling is one round
per `probe_s` or per counted result, whichever is first. Reading the benches is one key-value
read per account in the pool per round (fine for tens of accounts); a bench whose write failed
while the bus was away can be replaced by the older stored one at the next round.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from pydantic import ValidationError

from bus import identity
from bus.protocol import MatchEvent, MatchRecord, MatchSpec
from bus.streams import ensure_streams, publish_stored
from bus.subjects import Subjects
from games.probe import check_game
from referee.acceptance import record_problem
from referee.config import ConfigError
from referee.ladder.audit import Audit, audit
from referee.ladder.board import BoardRow, Quality, board, with_quality
from referee.ladder.bounds import visible_rows
from referee.ladder.config import LadderConfig
from referee.ladder.matchmaking import next_pairings
from referee.ladder.pace import AccountRate, Paced, PairKey, paced, pair_key
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
        account_of: Callable[[str], str] = identity.account_of,
        registered: Callable[[], list[str]] | None = None,
    ) -> None:
        self.nc = nc
        # Self-registered bots (bus/registry.py), asked each round beside the file's agents.
        self.registered = registered
        self.config = config
        self.subjects = subjects or Subjects()
        self.clock = clock
        self.account_of = account_of
        self.pool = Pool(list(config.agents), account_of)
        q = config.quarantine
        self.quarantine = Quarantine(q.limit, q.backoff_s, max(q.max_backoff_s, q.backoff_s))
        self.limiter = RateLimit(config.rate_per_minute, config.concurrency, clock())
        self.account_rate = AccountRate(config.pace.per_account_per_minute)
        self.paced: dict[PairKey, Paced] = {}  # pairings at their cap, as of the last round
        self.seen: dict[str, float] = {}  # entry -> when last in the pool or scheduled
        self.audit: Audit | None = None  # the last collusion report (every `log_interval_s`)
        self._audit_task: asyncio.Task[None] | None = None
        self._published: set[tuple[str, str]] = set()  # (game, entry) of the rows last exported
        self._since = Counter[str]()  # what happened since the last summary line
        self._summary_at = clock()
        self.store: LadderStore | None = None
        self.results: list[LadderResult] = []
        self.pending: dict[str, Pending] = {}
        self.scheduled = 0  # specs this process published
        self.counted = 0  # results this process counted
        self.rows: list[BoardRow] = []  # the leaderboard as of the last counted result
        self.on_board: list[Callable[[list[BoardRow]], None]] = []
        # Move quality per (game, entry), set from the analyst's rows by `spielbus ladder --analysis`.
        self.quality: Mapping[tuple[str, str], Quality] = {}
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
        for r in self.results:
            for e in r.seats or [r.first, r.second]:
                self.seen[e] = max(self.seen.get(e, 0.0), r.scheduled_at)
        for key, (state, is_account) in (await self.store.benches()).items():
            # A bench stored before benches followed accounts is under its entry: its account's now.
            self.quarantine.restore(key if is_account else self.account(key), state)
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
                if self._summarise():
                    self._start_audit()
                self._wake.clear()
                await any_set([self._stop, self._wake], self.config.probe_s)
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            for task in (self._rows_task, self._audit_task):
                if task is not None:
                    with contextlib.suppress(Exception):
                        await task

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
        now = self.clock()
        for m in self.pool.members.values():
            self.seen[m.entry] = now
        # Entries unseen past `idle_s` are shown nowhere: forget them (a rotating bot's many).
        self.seen = {e: t for e, t in self.seen.items() if t >= now - self.config.limits.idle_s}
        if {(r.game, r.entry) for r in self.visible()} != self._published:
            self._publish_board()
        for m in joined:
            log.info("ladder: %s joined as %s", m.name, m.entry)
        for m in left:
            log.info("ladder: %s (%s) left", m.name, m.entry)
        try:
            await self._sync_benches()
            await self._sweep()
            await self._schedule()
        except Exception:
            # The bus away mid-round (a KV write or a publish that ran out of retries): the state
            # in the bucket is consistent (see `_submit`), so the next round simply goes on.
            log.warning("ladder: a round failed; trying again next round", exc_info=True)

    # -- scheduling ---------------------------------------------------------------------------

    def _summarise(self, force: bool = False) -> bool:
        """One log line per `limits.log_interval_s`: what the interval did and where things stand.
        True when it wrote one."""
        now = self.clock()
        if not force and now - self._summary_at < self.config.limits.log_interval_s:
            return False
        c, self._since = self._since, Counter()
        log.info(
            "ladder %s, last %.0f s: %d scheduled, %d counted (%d with faults), %d given up; "
            "%d in the pool, %d in flight, %d benched, %d pairings paced",
            self.config.name,
            now - self._summary_at,
            c["scheduled"],
            c["counted"],
            c["faulted"],
            c["given_up"],
            len(self.pool.members),
            len(self.pending),
            len(self.quarantine.benched(now)),
            len(self.paced),
        )
        self._summary_at = now
        return True

    def _start_audit(self) -> None:
        """The collusion report, off the loop, one at a time (referee/ladder/audit.py)."""
        if self._audit_task is not None and not self._audit_task.done():
            return
        self._audit_task = asyncio.create_task(self._run_audit())

    async def _run_audit(self) -> None:
        a = self.config.audit
        try:
            self.audit = await asyncio.to_thread(
                audit, list(self.results), self.account, a.alpha, a.min_games, a.min_forfeits
            )
        except Exception:
            log.warning("ladder: the collusion audit failed", exc_info=True)
            return
        for p in self.audit.pairs:
            if p.flagged:
                log.warning(
                    "ladder audit: %s vs %s in %s: score %.1f of %d, expected %.1f (p = %.2g)",
                    p.first,
                    p.second,
                    p.game,
                    p.score,
                    p.games,
                    p.expected,
                    p.p_value,
                )

    async def _sync_benches(self) -> None:
        """Benches an operator set or lifted (`spielbus ladder bench`) for the accounts in the pool."""
        if self.store is None:
            return
        for acct in {m.account for m in self.pool.members.values()}:
            stored = await self.store.get_bench(acct)
            if stored is not None and stored != self.quarantine.state(acct):
                self.quarantine.restore(acct, stored)

    def _pace_matches(self) -> list[tuple[str, list[str], float]]:
        """Every match scheduled or counted as (game, its seats' accounts, scheduled at)."""
        out = [
            (r.game, [self.account(e) for e in (r.seats or [r.first, r.second])], r.scheduled_at)
            for r in self.results
        ]
        out += [
            (p.spec.game.label(), [self.account(e) for e in p.entries.values()], p.scheduled_at)
            for p in self.pending.values()
        ]
        return out

    def _blocked(self, label: str) -> Callable[[str, str], bool]:
        """Pairs not to schedule now: two seats of one account, or a pairing at its pace."""

        def blocked(a: str, b: str) -> bool:
            x, y = self.account(a), self.account(b)
            return x == y or pair_key(label, x, y) in self.paced

        return blocked

    def account(self, entry: str) -> str:
        """The account (login) an entry's messages come from: what the ladder benches and paces."""
        return self.account_of(entry)

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
        self.paced = paced(self._pace_matches(), self.config.pace, now)
        # A registered bot (not in the file) plays one match at a time.
        members = {
            m.name: m for m in self.pool.members.values() if self.quarantine.schedulable(m.account, now)
        }
        slots = {
            m.entry: min(
                (a.concurrency if (a := self.config.agents.get(n)) else 1) - busy[n],
                self.account_rate.available(m.account, now),
            )
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
                    blocked=self._blocked(label),
                )
                groups = [[p.first, p.second] for p in pairings]
            else:
                groups = self._groups(label, list(entries), n, slots, limit, classes)
            for group in groups:
                await self._submit(label, [entries[e] for e in group], {entries[e]: e for e in group})
                for e in group:
                    slots[e] -= 1
                    self.account_rate.take(self.account(e), now)
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
        blocked = self._blocked(label)
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
            group = [anchor]
            for e in sorted(peers, key=lambda e: abs(mu[e] - mu[anchor])):
                if len(group) < n and not any(blocked(e, g) for g in group):
                    group.append(e)
            if len(group) < n:  # no full group without a paced pairing: this anchor waits
                free[anchor] = 0
                continue
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
        for e in entries.values():
            self.seen[e] = pending.scheduled_at
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
        self._since["scheduled"] += 1
        log.debug("ladder: scheduled %s: %s (%s)", spec.match_id, " vs ".join(seats), label)

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
        if result is not None:
            result = result.model_copy(update={"scheduled_at": pending.scheduled_at})
        if result is not None and await self.store.record(result):
            self.results.append(result)
            self.counted += 1
            self._since["counted"] += 1
            self._since["faulted"] += bool(result.faults)
            now = self.clock()
            # One step of the account's streak per match: a fault of any of its seats counts.
            faults: dict[str, str | None] = {}
            for entry in result.seats or [result.first, result.second]:
                acct = self.account(entry)
                faults[acct] = faults.get(acct) or result.faults.get(entry)
            for acct, fault in faults.items():
                state = self.quarantine.result(acct, fault, now)
                if state is not None:
                    await self._put_bench(acct, state)
            self._refresh_rows()
        elif result is None:
            log.warning("ladder: match %s ended %s: not rated", mid, record.outcome)
        self.pending.pop(mid, None)
        await self.store.drop_pending(mid)
        self._wake.set()

    async def _put_bench(self, account: str, state: BenchState) -> None:
        assert self.store is not None
        try:
            stored = await self.store.get_bench(account)
            if stored is not None and stored.until > state.until:
                # An operator's longer bench (`spielbus ladder bench`) stands.
                state = state.model_copy(update={"until": stored.until, "reason": stored.reason})
                self.quarantine.restore(account, state)
            await self.store.put_bench(account, state)
        except Exception:  # the bus away: the bench holds in memory; a restart may forget this one
            log.warning("ladder: storing the quarantine state of %s failed", account, exc_info=True)

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
                self._since["given_up"] += 1
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
            self._publish_board()

    def visible(self) -> list[BoardRow]:
        """The rows shown and exported: recent entries, a few per account, a bounded number
        (referee/ladder/bounds.py)."""
        return visible_rows(self.rows, self.seen, self.account, self.config.limits, self.clock())

    def _publish_board(self) -> None:
        rows = self.visible()
        self._published = {(r.game, r.entry) for r in rows}
        for cb in self.on_board:
            try:
                cb(rows)
            except Exception:
                log.warning("ladder: a leaderboard listener failed", exc_info=True)

    def _audit_view(self) -> dict[str, Any] | None:
        """The page's audit panel: flagged pairings and one-sided forfeits, 20 of each at most."""
        if self.audit is None:
            return None
        return {
            "alpha": self.audit.alpha,
            "tested": self.audit.pairs_tested,
            "pairs": [p.model_dump() for p in self.audit.pairs if p.flagged][:20],
            "forfeits": [f.model_dump() for f in self.audit.forfeits][:20],
        }

    def leaderboard(self) -> dict[str, Any]:
        """What the live page shows: the rows with live status (in the pool, benched and why)."""
        now = self.clock()
        benched = self.quarantine.benched(now)
        present = {m.entry for m in self.pool.members.values()}
        busy = self._busy()
        shown = with_quality(self.visible(), self.quality)
        rows = [
            {
                **r.model_dump(),
                "present": r.entry in present,
                "playing": busy[r.name] if r.entry in present else 0,
                "budget": self.config.budget_class(r.name),
                "account": self.account(r.entry),
                "benched": benched.get(self.account(r.entry), ""),
            }
            for r in shown
        ]
        rated = {r.entry for r in self.rows}
        waiting = [
            {
                "entry": m.entry,
                "name": m.name,
                "budget": self.config.budget_class(m.name),
                "account": m.account,
                "benched": benched.get(m.account, ""),
            }
            for m in self.pool.members.values()
            if m.entry not in rated
        ]
        pace = self.config.pace
        return {
            "ladder": self.config.name,
            "games": [g.label() for g in self.config.games],
            "rows": rows,
            "unrated": waiting,
            "hidden": len(self.rows) - len(shown),
            "audit": self._audit_view(),
            "pace": {"per_pairing_per_hour": pace.per_pairing_per_hour, "per_pairing": pace.per_pairing},
            "paced": [
                {
                    "game": p.game,
                    "accounts": list(p.accounts),
                    "last_hour": p.last_hour,
                    "total": p.total,
                    "until": p.until,
                }
                for p in self.paced.values()
            ],
            "pending": len(self.pending),
            "results": len(self.results),
        }
