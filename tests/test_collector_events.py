"""`referee.collector.submit_and_collect` waits on events and timers, not a poll loop: a stop, a
closed connection and the stall warning each end or wake the wait by themselves. Real nats-server;
no referee runs, so nothing else happens (other collector behaviour: test_referee_reliability.py)."""

from __future__ import annotations

import asyncio

import pytest

from bus.connect import connect
from referee.collector import Collector, CollectStopped, submit_and_collect
from tests.helpers import uid
from tests.reliability_helpers import make_specs, new_prefix


class _Collector(Collector):
    """Sets `submitted` when every spec is on the work queue (the collector's first progress)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self.submitted = asyncio.Event()

    def progress(self) -> None:
        super().progress()
        self.submitted.set()


async def test_the_stall_warning_fires_once_and_the_idle_limit_ends_the_wait(nc) -> None:
    subjects = new_prefix()
    specs = make_specs(uid("stall"), "tic_tac_toe", [["x", "y"]])
    warnings: list[str] = []
    collector = Collector(specs, lambda r: None)
    await asyncio.wait_for(
        submit_and_collect(
            nc,
            specs,
            subjects,
            lambda r: None,
            stall_warning=lambda: warnings.append("stalled"),
            stall_after=0.2,
            idle_s=2.0,
            collector=collector,
        ),
        120,
    )
    assert warnings == ["stalled"]
    assert "progress" in collector.failed[specs[0].match_id]


async def test_setting_stop_ends_a_wait_without_timers(nc) -> None:
    # No deadline, no idle limit, no stall warning: only the event can end the wait.
    subjects = new_prefix()
    specs = make_specs(uid("stop"), "tic_tac_toe", [["x", "y"]])
    stop = asyncio.Event()
    collector = _Collector(specs, lambda r: None)
    task = asyncio.create_task(
        submit_and_collect(nc, specs, subjects, lambda r: None, idle_s=None, collector=collector, stop=stop)
    )
    await asyncio.wait_for(collector.submitted.wait(), 60)
    stop.set()
    with pytest.raises(CollectStopped):
        await asyncio.wait_for(task, 60)


async def test_a_closed_connection_ends_a_wait_without_timers(nats_url: str) -> None:
    own = await connect(nats_url, name="closing")
    subjects = new_prefix()
    specs = make_specs(uid("closed"), "tic_tac_toe", [["x", "y"]])
    collector = _Collector(specs, lambda r: None)
    task = asyncio.create_task(
        submit_and_collect(own, specs, subjects, lambda r: None, idle_s=None, collector=collector)
    )
    await asyncio.wait_for(collector.submitted.wait(), 60)
    await own.close()
    with pytest.raises(ConnectionError, match="for good"):
        await asyncio.wait_for(task, 60)
