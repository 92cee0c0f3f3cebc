"""The response cache of the Minimax-ToT paper (section 3.3): identical requests reuse the first answer.

Keyed by the whole request (backend, URL, model, messages, sampling options,
number of samples, output constraint), so a sampled answer at temperature > 0 is
reused too, exactly as the paper's dictionary does. One cache per agent, shared
by all its decisions and matches. Concurrent identical requests share one call
(the later ones wait for the first and count as hits). Bounded LRU; failures are
never cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class SharedCallCancelled(Exception):
    """Raised to waiters of an identical in-flight request whose first caller was cancelled."""


def request_key(request: dict[str, Any]) -> str:
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache(Generic[T]):
    def __init__(self, max_entries: int = 20_000) -> None:
        self.max_entries = max_entries
        self._done: OrderedDict[str, T] = OrderedDict()
        self._inflight: dict[str, asyncio.Future[T]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._done)

    def get(self, key: str) -> T | None:
        value = self._done.get(key)
        if value is not None:
            self._done.move_to_end(key)
        return value

    def put(self, key: str, value: T) -> None:
        if self.max_entries <= 0:
            return
        self._done[key] = value
        self._done.move_to_end(key)
        while len(self._done) > self.max_entries:
            self._done.popitem(last=False)

    async def get_or_call(self, key: str, call: Callable[[], Awaitable[T]]) -> tuple[T, bool]:
        """The cached value and True, or the result of `call()` (then cached) and False."""
        value = self.get(key)
        if value is not None:
            self.hits += 1
            return value, True
        pending = self._inflight.get(key)
        if pending is not None:
            # shield: one waiter's cancellation must not cancel the shared call.
            value = await asyncio.shield(pending)
            self.hits += 1
            return value, True
        fut: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._inflight[key] = fut
        try:
            value = await call()
        except BaseException as exc:
            # A cancelled first caller must not cancel the waiters: they get an ordinary error.
            shared = (
                SharedCallCancelled("the shared call was cancelled")
                if isinstance(exc, asyncio.CancelledError)
                else exc
            )
            fut.set_exception(shared)
            fut.exception()  # mark retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            self._inflight.pop(key, None)
        fut.set_result(value)
        self.misses += 1
        self.put(key, value)
        return value, False

    def clear(self) -> None:
        self._done.clear()
