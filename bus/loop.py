"""The event loop every long-running process of ours runs on: uvloop where it is installed.

Much of a move's path is event-loop passes, socket calls and the protocol parser
(docs/performance.md), and uvloop (libuv, in Cython) does the loop's part in less time than
asyncio's pure-Python loop: in the same session, a bare nats.py round trip went from about 2,000 to
2,400-2,700 a second and a `BusVectorEnv(16)` from about 1,400 to 1,600-1,700 steps a second; engine
matches, whose plies are mostly the engine's, did not move (docs/performance.md, issue 44).

`SPIELBUS_EVENT_LOOP=asyncio` keeps the standard loop (to compare, or to debug with asyncio's own
debug mode); uvloop is a dependency on Linux and macOS, and the standard loop is used where it is
not installed (Windows).

Garbage collection: Python collects its youngest generation every 700 container allocations
(its default), which a referee or an agent reaches every few moves: it validates, builds and
records small models all the time. `tune_gc` (run with every loop made here) raises that first
threshold to 10,000 in a process that still has Python's default: a `BusVectorEnv(16)` step then
cost the session's loop thread about 7% less CPU (docs/performance.md, issue 44). Objects are
still freed as their last reference goes; only cycles wait longer. `SPIELBUS_GC_THRESHOLD=N` sets
the first threshold to N instead (700 keeps Python's), and a process that set its own keeps it.

Limits: uvloop's clock (`loop.time()`) counts whole milliseconds, so nothing of ours measures a
latency with it: latencies are taken with `time.perf_counter()` (referee/request.py); the loop's
clock only schedules deadlines, where a millisecond is well inside the tolerances
(`referee.request.STALL_S`, `LAG_TOLERANCE_S`).
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

ENV_VAR = "SPIELBUS_EVENT_LOOP"
GC_ENV_VAR = "SPIELBUS_GC_THRESHOLD"
PYTHON_GC_FIRST = 700  # CPython's default first threshold
GC_FIRST = 10_000


class EventLoopChoiceError(ValueError):
    """`SPIELBUS_EVENT_LOOP` names no loop we run on (the message says which ones do)."""


class GcThresholdError(ValueError):
    """`SPIELBUS_GC_THRESHOLD` is not a whole number of at least 1."""


def tune_gc() -> None:
    """The collector's first threshold: `SPIELBUS_GC_THRESHOLD` when set, else `GC_FIRST` where
    the process still has Python's default (see the module docstring)."""
    first, *older = gc.get_threshold()
    raw = os.environ.get(GC_ENV_VAR, "").strip()
    if raw:
        if not raw.isdigit() or int(raw) < 1:
            raise GcThresholdError(f"{GC_ENV_VAR}={raw!r}: a whole number of at least 1 (700 is Python's)")
        gc.set_threshold(int(raw), *older)
    elif first == PYTHON_GC_FIRST:
        gc.set_threshold(GC_FIRST, *older)


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
    """A new event loop of the chosen kind (for a loop run in a thread of its own), the collector
    tuned (`tune_gc`)."""
    factory = loop_factory()
    tune_gc()
    return factory()


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the chosen loop, the collector tuned (`tune_gc`)."""
    try:
        factory = loop_factory()
        tune_gc()
    except BaseException:
        main.close()  # never started: no "coroutine was never awaited" warning on top of the error
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
