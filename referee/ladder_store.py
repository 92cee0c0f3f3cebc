"""The ladder's results, durable in a JetStream key-value bucket, each match counted once.

One key per finished match (`result.<match id>`), written with `create`, which fails when the key
exists: a result delivered twice (a referee redelivery, a ladder restarted mid-write) is counted
once. The win counts the matchmaker and the ratings need are rebuilt from the bucket, so a
restart of the ladder, a referee or NATS (file storage) loses nothing and counts nothing twice.

Limits: part of issue 31's ladder; the long-running `spielbus ladder` service that feeds
`from_record` here is not built yet. Two-player results only (score of `first` against `second`
between 0 and 1, as referee/ratings.py scores the record).
Reading rebuilds from every key: fine for thousands of matches, not millions.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict

from nats.js.client import JetStreamContext
from nats.js.errors import KeyWrongLastSequenceError, NoKeysError
from nats.js.kv import KeyValue
from pydantic import BaseModel, ConfigDict, Field, field_validator

from bus.protocol import MatchRecord
from referee.config import RatingsConfig
from referee.ratings import record_pairs

BUCKET = "SPIELBUS_LADDER"
_KEY_SAFE = re.compile(r"[^-=a-zA-Z0-9]")


class LadderResult(BaseModel):
    """One finished two-player ladder match."""

    model_config = ConfigDict(strict=True, extra="forbid")

    match_id: str = Field(min_length=1, max_length=200)
    first: str = Field(min_length=1)
    second: str = Field(min_length=1)
    score: float = Field(ge=0.0, le=1.0, description="first's score against second")

    @field_validator("score")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("score must be finite")
        return v


def from_record(rec: MatchRecord, cfg: RatingsConfig | None = None) -> LadderResult | None:
    """A two-player record's result, scored as the ratings score it (a forfeit for an invalid
    action as a fraction of a loss); None for an unrated record (error, pending) or more seats."""
    pairs = record_pairs(rec, cfg or RatingsConfig())
    if len(rec.seats) != 2 or len(pairs) != 1:
        return None
    p = pairs[0]
    return LadderResult(match_id=rec.match_id, first=p.a, second=p.b, score=p.score)


def result_key(match_id: str) -> str:
    # KV keys allow a narrow alphabet; any other character (the escape mark "_" too) as _hex_
    # keeps distinct ids distinct.
    return "result." + _KEY_SAFE.sub(lambda m: f"_{ord(m.group()):x}_", match_id)


class LadderStore:
    def __init__(self, kv: KeyValue) -> None:
        self.kv = kv

    @classmethod
    async def open(cls, js: JetStreamContext, bucket: str = BUCKET) -> LadderStore:
        try:
            kv = await js.key_value(bucket)
        except Exception:  # nats-py raises BucketNotFoundError or a NotFound API error by version
            kv = await js.create_key_value(bucket=bucket, history=1)
        return cls(kv)

    async def record(self, result: LadderResult) -> bool:
        """Store a result; False (and nothing changed) when that match was already counted."""
        try:
            await self.kv.create(result_key(result.match_id), result.model_dump_json().encode())
        except KeyWrongLastSequenceError:
            return False
        return True

    async def results(self) -> list[LadderResult]:
        try:
            keys = await self.kv.keys()
        except NoKeysError:
            return []
        out = []
        for key in keys:
            entry = await self.kv.get(key)
            if entry.value:
                out.append(LadderResult.model_validate_json(entry.value))
        return sorted(out, key=lambda r: r.match_id)

    async def wins(self) -> dict[tuple[str, str], float]:
        """Win counts of ordered pairs (a draw is half a win each way), as referee/matchmaking takes."""
        wins: dict[tuple[str, str], float] = defaultdict(float)
        for r in await self.results():
            wins[(r.first, r.second)] += r.score
            wins[(r.second, r.first)] += 1.0 - r.score
        return dict(wins)
