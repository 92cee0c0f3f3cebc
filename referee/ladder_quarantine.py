"""The ladder's fault quarantine: an entry that keeps faulting is benched for a while, with a reason.

`Quarantine.result(entry, fault, now)` counts consecutive faulted matches of an entry (a clean
match resets the count); at `limit` in a row the entry is benched until `now + backoff`, the
backoff doubling on each bench up to `max_backoff_s`, so a broken bot is retried later without
eating the ladder's games. `benched(now)` is what the leaderboard shows: entry -> reason.

Limits: part of issue 31's ladder (the service that applies it is not built yet); state is in
memory: a restarted ladder forgets benches (the results themselves are durable, ladder_store).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class _State:
    streak: int = 0
    benches: int = 0
    until: float = 0.0
    reason: str = ""


class Quarantine:
    def __init__(self, limit: int = 3, backoff_s: float = 300.0, max_backoff_s: float = 3600.0) -> None:
        if limit < 1 or not (0 < backoff_s <= max_backoff_s):
            raise ValueError("limit >= 1 and 0 < backoff_s <= max_backoff_s")
        self.limit, self.backoff_s, self.max_backoff_s = limit, backoff_s, max_backoff_s
        self._s: dict[str, _State] = {}

    def result(self, entry: str, fault: str | None, now: float) -> None:
        """One finished match of `entry`: `fault` is its fault reason, None for a clean match."""
        st = self._s.setdefault(entry, _State())
        if fault is None:
            st.streak = 0
            return
        st.streak += 1
        if st.streak >= self.limit:
            st.until = now + min(self.backoff_s * 2**st.benches, self.max_backoff_s)
            st.benches += 1
            st.streak = 0
            st.reason = f"{self.limit} faulted matches in a row (last: {fault}); retried later"

    def schedulable(self, entry: str, now: float) -> bool:
        st = self._s.get(entry)
        return st is None or now >= st.until

    def benched(self, now: float) -> dict[str, str]:
        return {e: st.reason for e, st in self._s.items() if now < st.until}
