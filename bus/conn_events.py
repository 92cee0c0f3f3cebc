"""Hearing a NATS connection come back or close as an event, instead of polling its statistics.

nats-py takes one `reconnected_cb` and one `closed_cb`, at connect time (bus/connect.py sets them
to log the connection's life). `watch(nc)` chains a notifier after whatever callbacks the client
has, once per client, and hands each caller its own `asyncio.Event`: set when the connection is
re-established or closed for good, cleared by the caller once it has acted. Any number of
watchers may share one client (an SPRT run collects several pairs at once).

Limits: builds on nats-py's `_reconnected_cb` and `_closed_cb` attributes (nats-py 2.16.0, which
`pyproject.toml` pins); tests/test_conn_events.py fails if an upgrade changes them. Callbacks
given to the client after its first `watch` are not chained. A disconnect alone is not an event
(what a watcher does about it waits for the reconnect or the close).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Awaitable, Callable, Iterator

from nats.aio.client import Client as NATS

Callback = Callable[[], Awaitable[None]]


class _Notifier:
    """The chained callbacks of one client and the events of its watchers."""

    def __init__(self, nc: NATS) -> None:
        self.events: set[asyncio.Event] = set()
        self._reconnected: Callback | None = nc._reconnected_cb
        self._closed: Callback | None = nc._closed_cb
        nc._reconnected_cb = self._on_reconnected
        nc._closed_cb = self._on_closed

    def _fire(self) -> None:
        for event in self.events:
            event.set()

    async def _on_reconnected(self) -> None:
        self._fire()
        if self._reconnected is not None:
            await self._reconnected()

    async def _on_closed(self) -> None:
        self._fire()
        if self._closed is not None:
            await self._closed()


_notifiers: weakref.WeakKeyDictionary[NATS, _Notifier] = weakref.WeakKeyDictionary()


@contextlib.contextmanager
def watch(nc: NATS) -> Iterator[asyncio.Event]:
    """An event set whenever `nc` reconnects or closes, for the duration of the `with` block."""
    notifier = _notifiers.get(nc)
    if notifier is None:
        notifier = _notifiers[nc] = _Notifier(nc)
    event = asyncio.Event()
    notifier.events.add(event)
    try:
        yield event
    finally:
        notifier.events.discard(event)
