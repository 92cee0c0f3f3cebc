"""Waiting for the first of several `asyncio.Event`s, or a timeout: how the collector and the
worker wait on what happens instead of polling for it.

Limits: one task per event per wait, cancelled on return; meant for waits that end on an event
or a timer, not for a hot path.
"""

from __future__ import annotations

import asyncio


async def any_set(events: list[asyncio.Event], within_s: float | None) -> None:
    """Return when one of `events` is set, or after `within_s` seconds (None: no limit)."""
    waiters = [asyncio.ensure_future(e.wait()) for e in events]
    try:
        await asyncio.wait(waiters, timeout=within_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waiters:
            w.cancel()
