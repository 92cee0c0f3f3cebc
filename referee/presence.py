"""Which agents a referee worker knows to be absent, so their matches wait instead of burning.

An agent is marked absent when a turn's `no_responder` retries ran out its whole deadline.
From then on, for up to `limit_s` seconds, a turn for it keeps waiting (with backoff) rather
than recording `no_responder`, and the worker parks the other specs that seat it (without
holding a concurrency slot) while one match is already waiting for it: scheduling pauses for
that agent while the rest of the tournament goes on. Its first answer marks it present again
and releases them. After `limit_s` the worker stops waiting: its turns are recorded as
`no_responder` again, as the fault policy says. `limit_s = 0` never waits.
Each change is logged at WARNING, which `spielbus run` and `spielbus referee` print.
`until_change` lets the worker wait for a parked spec's agents without polling: it returns when
an agent answers again, a waiting turn ends, or an absence reaches the limit.
Limits: per worker process; several workers learn of an absence each on its own.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Iterable

from referee.wake import any_set

log = logging.getLogger(__name__)

DEFAULT_ABSENT_LIMIT_S = 60.0


class Presence:
    """One worker's view of which agents are absent since when, and how many turns wait for each."""

    def __init__(self, limit_s: float = DEFAULT_ABSENT_LIMIT_S) -> None:
        self.limit_s = limit_s
        self._since: dict[str, float] = {}
        self._given_up: set[str] = set()
        # Turns currently waiting for each absent agent (the worker parks others while one waits).
        self.waiters: Counter[str] = Counter()
        self._watchers: set[asyncio.Event] = set()

    def _changed(self) -> None:
        for event in self._watchers:
            event.set()

    def start_waiting(self, agent: str) -> None:
        """A turn waits for absent `agent` (counted until `stop_waiting`)."""
        self.waiters[agent] += 1

    def stop_waiting(self, agent: str) -> None:
        self.waiters[agent] -= 1
        self._changed()

    def wait_for(self, agent: str) -> float:
        """`agent` just ran out a turn's deadline unanswered: how many more seconds the turn may wait
        for it (0: stop waiting). Never past the limit, whatever the turn's deadline: a turn that
        waited a whole deadline again would keep a 1-second limit waiting for 30 seconds."""
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
            return since + self.limit_s - now
        if agent not in self._given_up:
            self._given_up.add(agent)
            log.warning(
                "agent %s has been absent for %.0f s (the limit): its turns are forfeited as no_responder",
                agent,
                now - since,
            )
        return 0.0

    def mark_present(self, agent: str) -> None:
        since = self._since.pop(agent, None)
        self._given_up.discard(agent)
        if since is not None:
            log.warning("agent %s answers again after %.1f s", agent, time.monotonic() - since)
            self._changed()

    def is_waiting(self, agent: str) -> bool:
        since = self._since.get(agent)
        return since is not None and time.monotonic() - since < self.limit_s

    def parked_by(self, seats: Iterable[str]) -> list[str]:
        """The seats of a spec that should not start yet: absent, within the limit, already waited for."""
        return [a for a in dict.fromkeys(seats) if self.is_waiting(a) and self.waiters[a] > 0]

    async def until_change(self, seats: Iterable[str], stop: asyncio.Event) -> None:
        """Return when an agent answers again, a waiting turn ends, the first absence among `seats`
        reaches the limit, or `stop` is set: then `parked_by(seats)` is worth asking again."""
        changed = asyncio.Event()
        self._watchers.add(changed)
        try:
            ends = [self._since[a] + self.limit_s for a in seats if a in self._since]
            within = max(min(ends) - time.monotonic(), 0.0) if ends else None
            await any_set([changed, stop], within)
        finally:
            self._watchers.discard(changed)
