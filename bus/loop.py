"""The event loop every long-running process of ours runs on: uvloop where it is installed.

Much of a move's path is event-loop passes, socket calls and the protocol parser
(docs/performance.md), and uvloop (libuv, in Cython) does the loop's part in less time than
asyncio's pure-Python loop: in the same session, a bare nats.py round trip went from about 2,000 to
2,400-2,700 a second and a `BusVectorEnv(16)` from about 1,400 to 1,600-1,700 steps a second; engine
matches, whose plies are mostly the engine's, did not move (docs/performance.md, issue 44).

`SPIELBUS_EVENT_LOOP=asyncio` keeps the standard loop (to compare, or to debug with asyncio's own
debug mode); uvloop is a dependency on Linux and macOS, and the standard loop is used where it is
not installed (Windows).

Limits: uvloop's clock (`loop.time()`) counts whole milliseconds, so nothing of ours measures a
latency with it: latencies are taken with `time.perf_counter()` (referee/request.py); the loop's
clock only schedules deadlines, where a millisecond is well inside the tolerances
(`referee.request.STALL_S`, `LAG_TOLERANCE_S`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV_VAR = "SPIELBUS_EVENT_LOOP"


class EventLoopChoiceError(ValueError):
    """`SPIELBUS_EVENT_LOOP` names no loop we run on (the message says which ones do)."""


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """What makes a new event loop: uvloop's, unless `SPIELBUS_EVENT_LOOP=asyncio` or not installed."""
    choice = os.environ.get(ENV_VAR, "").strip().lower()
    if choice not in ("", "uvloop", "asyncio"):
        raise EventLoopChoiceError(f"{ENV_VAR}={choice!r}: use 'uvloop' or 'asyncio'")
    if choice != "asyncio":
        try:
            import uvloop
        except ImportError:
            if choice == "uvloop":
                raise
        else:
            return uvloop.new_event_loop
    return asyncio.new_event_loop


def new_loop() -> asyncio.AbstractEventLoop:
    """A new event loop of the chosen kind (for a loop run in a thread of its own)."""
    return loop_factory()()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the chosen loop."""
    try:
        factory = loop_factory()
    except BaseException:
        main.close()  # never started: no "coroutine was never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
