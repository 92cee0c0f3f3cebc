"""Which agents a referee worker knows to be absent, so their matches wait instead of burning.

An agent is marked absent when a turn's `no_responder` retries ran out its whole deadline.
From then on, for up to `limit_s` seconds, a turn for it keeps waiting (with backoff) rather
than recording `no_responder`, and the worker parks the other specs that seat it (without
holding a concurrency slot) while one match is already waiting for it: scheduling pauses for
that agent while the rest of the tournament goes on. Its first answer marks it present again
and releases them. After `limit_s` the worker stops waiting: its turns are recorded as
`no_responder` again, as the fault policy says. `limit_s = 0` never waits.
Each change is logged at WARNING, which `spielbus run` and `spielbus referee` print.
Limits: per worker process; several workers learn of an absence each on its own.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterable

log = logging.getLogger(__name__)

DEFAULT_ABSENT_LIMIT_S = 60.0


class Presence:
    def __init__(self, limit_s: float = DEFAULT_ABSENT_LIMIT_S) -> None:
        self.limit_s = limit_s
        self._since: dict[str, float] = {}
        self._given_up: set[str] = set()
        # Turns currently waiting for each absent agent (the worker parks others while one waits).
        self.waiters: Counter[str] = Counter()

    def wait_for(self, agent: str) -> bool:
        """`agent` just ran out a turn's deadline unanswered: should the turn go on waiting?"""
        now = time.monotonic()
        since = self._since.get(agent)
        if since is None:
            since = self._since[agent] = now
            if self.limit_s > 0:
                log.warning(
                    "agent %s does not answer (no_responder): its matches wait up to %.0f s for it",
                    agent,
                    self.limit_s,
                )
        if now - since < self.limit_s:
            return True
        if agent not in self._given_up:
            self._given_up.add(agent)
            log.warning(
                "agent %s has been absent for %.0f s (the limit): its turns are forfeited as no_responder",
                agent,
                now - since,
            )
        return False

    def mark_present(self, agent: str) -> None:
        since = self._since.pop(agent, None)
        self._given_up.discard(agent)
        if since is not None:
            log.warning("agent %s answers again after %.1f s", agent, time.monotonic() - since)

    def is_waiting(self, agent: str) -> bool:
        since = self._since.get(agent)
        return since is not None and time.monotonic() - since < self.limit_s

    def parked_by(self, seats: Iterable[str]) -> list[str]:
        """The seats of a spec that should not start yet: absent, within the limit, already waited for."""
        return [a for a in dict.fromkeys(seats) if self.is_waiting(a) and self.waiters[a] > 0]
