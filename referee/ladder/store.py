"""The ladder's results, durable in a JetStream key-value bucket, each match counted once.

One key per finished match (`result.<match id>`), written with `create`, which fails when the key
exists: a result delivered twice (a referee redelivery, a ladder restarted mid-write) is counted
once. The win counts the matchmaker and the ratings need are rebuilt from the bucket, so a
restart of the ladder, a referee or NATS (file storage) loses nothing and counts nothing twice.

The ladder service (referee/ladder/service.py) also keeps each match it scheduled and has not yet
counted as `pending.<match id>`: a restarted ladder waits for those records (or sends the spec
again, deduplicated by match id) instead of forgetting them; and each account's quarantine state
as `bench.<account>`, so a restarted ladder keeps a benched account benched with its reason.

Limits: two-player results only (score of `first` against `second` between 0 and 1, as
referee/ratings.py scores the record). Reading rebuilds from every key: fine for thousands of
matches, not millions.
"""

from __future__ import annotations

import contextlib
import math
import re
from collections import defaultdict

import nats.errors
from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
from nats.js.client import JetStreamContext
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError
from nats.js.kv import KV_DEL, KV_OP, KV_PURGE, KeyValue
from pydantic import BaseModel, ConfigDict, Field, field_validator

from bus.protocol import MatchRecord, MatchSpec
from bus.streams import stream_replicas
from bus.subjects import LADDER_BUCKET
from referee.config import RatingsConfig
from referee.ladder.quarantine import BenchState
from referee.ratings import record_pairs

BUCKET = LADDER_BUCKET  # the one bucket the referee account may use under accounts (bus/auth.py)
# Reading a prefix of the bucket (`LadderStore._values`): messages a fetch asks for, how long it
# waits for them, and how long the server keeps a reader that went away (its consumer is ephemeral).
_READ_BATCH = 512
_READ_WAIT_S = 10.0
_READ_IDLE_S = 60.0
_KEY_SAFE = re.compile(r"[^-=a-zA-Z0-9]")


class LadderResult(BaseModel):
    """One finished ladder match. Two players: `first`'s `score` against `second`. More players
    (`from_group_record`): every seat's entry in `seats` and finishing place in `ranks` (1 best),
    `first`/`second`/`score` the first two seats' comparison."""

    model_config = ConfigDict(strict=True, extra="forbid")

    match_id: str = Field(min_length=1, max_length=200)
    first: str = Field(min_length=1)
    second: str = Field(min_length=1)
    score: float = Field(ge=0.0, le=1.0, description="first's score against second")
    game: str = Field(default="", description="the game's label; ratings are kept per game")
    faults: dict[str, str] = Field(default_factory=dict, description="entry -> fault reason, if any")
    seats: list[str] = Field(default_factory=list, description="N-player: entries in seat order")
    ranks: list[int] = Field(default_factory=list, description="N-player: finishing place per seat")
    scheduled_at: float = Field(default=0.0, description="when the ladder scheduled it (0: not kept)")

    @field_validator("score", "scheduled_at")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v


def from_record(
    rec: MatchRecord, cfg: RatingsConfig | None = None, entries: dict[str, str] | None = None
) -> LadderResult | None:
    """A two-player record's result, scored as the ratings score it (a forfeit for an invalid
    action as a fraction of a loss); None for an unrated record (error, pending) or more seats.
    `entries` maps seat names to ladder entries (name@provenance) the match was scheduled for."""
    pairs = record_pairs(rec, cfg or RatingsConfig())
    if len(rec.seats) != 2 or len(pairs) != 1:
        return None
    p = pairs[0]
    names = entries or {}
    faults: dict[str, str] = {names.get(f.agent, f.agent): f.reason for f in rec.faults}
    return LadderResult(
        match_id=rec.match_id,
        first=names.get(p.a, p.a),
        second=names.get(p.b, p.b),
        score=p.score,
        game=rec.game.label(),
        faults=faults,
    )


def from_group_record(rec: MatchRecord, entries: dict[str, str]) -> LadderResult | None:
    """A record of more than two seats as a result with every seat's place (rated by openskill's
    Plackett-Luce and, pair by pair, Bradley-Terry: referee/ladder/board.py); None when unrated."""
    if len(rec.seats) < 3 or rec.outcome in ("error", "pending") or len(rec.ranks) != len(rec.seats):
        return None
    seats = [entries.get(s, s) for s in rec.seats]
    r0, r1 = rec.ranks[0], rec.ranks[1]
    return LadderResult(
        match_id=rec.match_id,
        first=seats[0],
        second=seats[1],
        score=1.0 if r0 < r1 else 0.0 if r0 > r1 else 0.5,
        game=rec.game.label(),
        faults={entries.get(f.agent, f.agent): f.reason for f in rec.faults},
        seats=seats,
        ranks=list(rec.ranks),
    )


class Pending(BaseModel):
    """A match the ladder has scheduled and not yet counted: kept in the bucket so a restarted
    ladder knows it, waits for its record and never schedules it twice."""

    model_config = ConfigDict(strict=True, extra="forbid")

    spec: MatchSpec
    entries: dict[str, str] = Field(description="seat name -> entry it was scheduled as")
    scheduled_at: float


def _safe(match_id: str) -> str:
    # KV keys allow a narrow alphabet; any other character (the escape mark "_" too) as _hex_
    # keeps distinct ids distinct.
    return _KEY_SAFE.sub(lambda m: f"_{ord(m.group()):x}_", match_id)


def result_key(match_id: str) -> str:
    return "result." + _safe(match_id)


def pending_key(match_id: str) -> str:
    return "pending." + _safe(match_id)


def bench_key(account: str) -> str:
    return "bench." + _safe(account)


class StoredBench(BaseModel):
    """An account's quarantine state (referee/ladder/quarantine.py) under `bench.<account>`.
    Stored before benches followed accounts: an entry's, `account` absent (False)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    entry: str = Field(min_length=1, description="the account (an entry when `account` is False)")
    state: BenchState
    account: bool = False


class LadderStore:
    def __init__(self, kv: KeyValue, js: JetStreamContext, bucket: str) -> None:
        self.kv, self.js, self.bucket = kv, js, bucket

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = BUCKET) -> LadderStore:
        try:
            kv = await js.key_value(bucket)
        except Exception:  # nats-py raises BucketNotFoundError or a NotFound API error by version
            try:
                # As many copies as the match streams (a cluster's `--stream-replicas`): with one, losing
                # its server would stop the ladder's records.
                kv = await js.create_key_value(bucket=bucket, history=1, replicas=stream_replicas())
            except nats.errors.TimeoutError as exc:  # under accounts: a bucket the login may not use
                raise ConnectionError(
                    f"cannot open the key-value bucket {bucket} (under accounts the referee login may "
                    f"use {LADDER_BUCKET} only)"
                ) from exc
        return cls(kv, js, bucket)

    async def record(self, result: LadderResult) -> bool:
        """Store a result; False (and nothing changed) when that match was already counted."""
        try:
            await self.kv.create(result_key(result.match_id), result.model_dump_json().encode())
        except KeyWrongLastSequenceError:
            return False
        return True

    async def _values(self, prefix: str) -> list[bytes]:
        """The value of every key under `prefix`, deleted and purged keys left out: the last message
        of each key's subject, through a pull consumer that says how many there are before it sends
        any. Not nats.py's `kv.keys()`: its watcher can take the server's "nothing pending" for an
        empty bucket while the messages are still on their way (51 listings in 1,000 of 300 keys on
        an idle machine), and the ladder's audit then read no results from a full bucket. One
        consumer is also one read, where the listing read each key after it (9 times faster here)."""
        sub = await self.js.pull_subscribe(
            f"$KV.{self.bucket}.{prefix}>",
            stream=f"KV_{self.bucket}",
            config=ConsumerConfig(
                deliver_policy=DeliverPolicy.LAST_PER_SUBJECT,
                ack_policy=AckPolicy.NONE,
                inactive_threshold=_READ_IDLE_S,
                mem_storage=True,
            ),
        )
        out: list[bytes] = []
        info = None
        try:
            info = await sub.consumer_info()
            if info.num_pending == 0:
                return out
            while True:
                msgs = await sub.fetch(_READ_BATCH, timeout=_READ_WAIT_S)
                for msg in msgs:
                    # A key deleted or purged keeps a last message marked so.
                    if (msg.headers or {}).get(KV_OP) not in (KV_DEL, KV_PURGE) and msg.data:
                        out.append(msg.data)
                if msgs[-1].metadata.num_pending == 0:
                    return out
        finally:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()
            # A pull consumer outlives its subscription: deleted now, not at its idle limit (the
            # server's cap on a stream's consumers counts the ones left behind).
            if info is not None:
                with contextlib.suppress(Exception):
                    await self.js.delete_consumer(info.stream_name, info.name)

    async def results(self) -> list[LadderResult]:
        out = [LadderResult.model_validate_json(v) for v in await self._values("result.")]
        return sorted(out, key=lambda r: r.match_id)

    async def add_pending(self, pending: Pending) -> None:
        await self.kv.put(pending_key(pending.spec.match_id), pending.model_dump_json().encode())

    async def drop_pending(self, match_id: str) -> None:
        with contextlib.suppress(KeyNotFoundError):
            await self.kv.purge(pending_key(match_id))

    async def pending(self) -> list[Pending]:
        out = [Pending.model_validate_json(v) for v in await self._values("pending.")]
        return sorted(out, key=lambda p: p.spec.match_id)

    async def put_bench(self, account: str, state: BenchState) -> None:
        """Store an account's quarantine state (the last write wins)."""
        bench = StoredBench(entry=account, state=state, account=True)
        await self.kv.put(bench_key(account), bench.model_dump_json().encode())

    async def get_bench(self, account: str) -> BenchState | None:
        """One account's stored quarantine state, None when there is none."""
        try:
            entry = await self.kv.get(bench_key(account))
        except KeyNotFoundError:
            return None
        return StoredBench.model_validate_json(entry.value or b"").state if entry.value else None

    async def benches(self) -> dict[str, tuple[BenchState, bool]]:
        """Every stored quarantine state: account (or, stored by an older ladder, entry) ->
        (state, whether the key is an account)."""
        out = {}
        for v in await self._values("bench."):
            b = StoredBench.model_validate_json(v)
            out[b.entry] = (b.state, b.account)
        return out

    async def wins(self, game: str | None = None) -> dict[tuple[str, str], float]:
        """Win counts of ordered pairs (of one game's results when `game` is given)."""
        return win_counts(await self.results(), game)


def win_counts(results: list[LadderResult], game: str | None = None) -> dict[tuple[str, str], float]:
    """Win counts of ordered pairs (a draw is half a win each way), as referee/ladder/matchmaking takes."""
    wins: dict[tuple[str, str], float] = defaultdict(float)
    for r in results:
        if game is None or r.game == game:
            wins[(r.first, r.second)] += r.score
            wins[(r.second, r.first)] += 1.0 - r.score
    return dict(wins)
