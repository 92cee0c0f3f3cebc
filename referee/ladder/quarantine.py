"""The ladder's fault quarantine: an account that keeps faulting is benched for a while, with a reason.

The key is whatever the service passes: the account (the login a bot's messages come from), not
the `name@hash` entry, so a bot that changes its options keeps its bench and its streak.

`Quarantine.result(entry, fault, now)` counts consecutive faulted matches of an entry (a clean
match resets the count); at `limit` in a row the entry is benched until `now + backoff`, the
backoff doubling on each bench up to `max_backoff_s`, so a broken bot is retried later without
eating the ladder's games. `benched(now)` is what the leaderboard shows: entry -> reason.

Each entry's state is a `BenchState` (streak, benches so far, benched until, reason): `result`
returns it when it changed, so the service stores it in the ladder's bucket
(referee/ladder/store.py), and `restore` puts a stored one back, so a restarted ladder keeps a
benched entry benched with its reason. Limits: `until` is wall-clock time (the service's clock),
so a clock jump moves the end of a bench.
"""

from __future__ import annotations

import math

from pydantic import BaseModel, ConfigDict, Field, field_validator


class BenchState(BaseModel):
    """One entry's quarantine state, as stored in the ladder's bucket."""

    model_config = ConfigDict(strict=True, extra="forbid")

    streak: int = Field(default=0, ge=0)
    benches: int = Field(default=0, ge=0)
    until: float = 0.0
    reason: str = ""

    @field_validator("until")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("until must be finite")
        return v


class Quarantine:
    def __init__(self, limit: int = 3, backoff_s: float = 300.0, max_backoff_s: float = 3600.0) -> None:
        if limit < 1 or not (0 < backoff_s <= max_backoff_s):
            raise ValueError("limit >= 1 and 0 < backoff_s <= max_backoff_s")
        self.limit, self.backoff_s, self.max_backoff_s = limit, backoff_s, max_backoff_s
        self._s: dict[str, BenchState] = {}

    def result(self, entry: str, fault: str | None, now: float) -> BenchState | None:
        """One finished match of `entry`: `fault` is its fault reason, None for a clean match.
        Returns the entry's state when it changed (to be stored), else None."""
        st = self._s.setdefault(entry, BenchState())
        before = st.model_copy()
        if fault is None:
            st.streak = 0
        else:
            st.streak += 1
            if st.streak >= self.limit:
                st.until = now + min(self.backoff_s * 2**st.benches, self.max_backoff_s)
                st.benches += 1
                st.streak = 0
                st.reason = f"{self.limit} faulted matches in a row (last: {fault}); retried later"
        return st.model_copy() if st != before else None

    def restore(self, entry: str, state: BenchState) -> None:
        """Put back a stored state (a restarted ladder)."""
        self._s[entry] = state.model_copy()

    def state(self, key: str) -> BenchState | None:
        st = self._s.get(key)
        return st.model_copy() if st is not None else None

    def schedulable(self, entry: str, now: float) -> bool:
        st = self._s.get(entry)
        return st is None or now >= st.until

    def benched(self, now: float) -> dict[str, str]:
        return {e: st.reason for e, st in self._s.items() if now < st.until}
