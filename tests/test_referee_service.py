"""A referee worker is the `nats.micro` service `spielbus-referee` (referee/service.py): `$SRV.PING`
finds it, `$SRV.INFO` describes it, `$SRV.STATS` counts the matches it plays with nats.micro's own
fields; under accounts the referee user may answer those. Real nats-server, asked on the bus as
`nats micro ping|info|stats` asks."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bus.auth import config_path, load_auth, write_auth
from bus.connect import connect
from bus.server import EmbeddedNats
from bus.subjects import Subjects
from referee.collector import submit_and_collect
from referee.service import REFEREE_SERVICE
from referee.worker import RefereeWorker
from tests.helpers import uid, until
from tests.reliability_helpers import bot, make_specs, new_prefix


@contextlib.asynccontextmanager
async def running(nc: NATS, subjects: Subjects) -> AsyncIterator[RefereeWorker]:
    worker = RefereeWorker(nc, subjects=subjects, concurrency=2)
    task = asyncio.create_task(worker.run())
    try:
        await until(lambda: worker.service is not None, "the worker registered its service")
        yield worker
    finally:
        worker.stop()
        await task


async def ask_all(nc: NATS, subject: str, want_id: str) -> list[dict[str, Any]]:
    """Every reply to one discovery request, until the one from `want_id` has come."""
    replies: list[dict[str, Any]] = []
    ours = asyncio.Event()

    async def cb(msg: Msg) -> None:
        reply = json.loads(msg.data)
        replies.append(reply)
        if reply.get("id") == want_id:
            ours.set()

    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox, cb=cb)
    try:
        await nc.publish(subject, b"", reply=inbox)
        await asyncio.wait_for(ours.wait(), 30)
    finally:
        await sub.unsubscribe()
    return replies


async def test_a_worker_is_found_by_ping_and_its_matches_are_counted_in_stats(nc) -> None:
    subjects = new_prefix()
    a, b = uid("a"), uid("b")
    specs = make_specs(uid("srv"), "tic_tac_toe", [[a, b], [b, a]])
    async with running(nc, subjects) as worker, bot(nc, subjects, a), bot(nc, subjects, b):
        assert worker.service is not None
        sid = worker.service.service.id
        # Found among every service on the bus, and by name.
        pings = await ask_all(nc, "$SRV.PING", sid)
        ours = next(p for p in pings if p["id"] == sid)
        assert ours["name"] == REFEREE_SERVICE and ours["metadata"]["prefix"] == subjects.prefix
        assert any(p["id"] == sid for p in await ask_all(nc, f"$SRV.PING.{REFEREE_SERVICE}", sid))
        info = json.loads((await nc.request(f"$SRV.INFO.{REFEREE_SERVICE}.{sid}", b"", timeout=10)).data)
        assert [e["name"] for e in info["endpoints"]] == ["matches"]
        assert info["endpoints"][0]["subject"] == subjects.schedule
        assert info["metadata"]["concurrency"] == "2"

        await asyncio.wait_for(submit_and_collect(nc, specs, subjects, lambda r: None, idle_s=60), 180)
        await until(lambda: worker.played == 2, "both matches counted as played")
        stats = json.loads((await nc.request(f"$SRV.STATS.{REFEREE_SERVICE}.{sid}", b"", timeout=10)).data)
    (matches,) = stats["endpoints"]
    assert matches["num_requests"] == 2 and matches["num_errors"] == 0
    assert matches["processing_time"] > 0 and matches["average_processing_time"] > 0
    assert matches["data"] == {"in_flight": 0, "played": 2, "aborted": 0}


async def test_a_stopped_worker_leaves_discovery(nc) -> None:
    subjects = new_prefix()
    async with running(nc, subjects) as worker:
        assert worker.service is not None
        sid = worker.service.service.id
        await nc.request(f"$SRV.PING.{REFEREE_SERVICE}.{sid}", b"", timeout=10)
    # Stopped: nobody answers for that id any more (NATS says so at once).
    try:
        await nc.request(f"$SRV.PING.{REFEREE_SERVICE}.{sid}", b"", timeout=10)
    except Exception as exc:
        assert "responders" in type(exc).__name__.lower() or "responders" in str(exc).lower(), exc
    else:
        raise AssertionError("a stopped worker still answers $SRV.PING")


async def test_the_referee_user_may_answer_discovery_under_accounts(tmp_path: Path) -> None:
    write_auth(["alice"], tmp_path)
    with EmbeddedNats(config=config_path(tmp_path)) as srv:
        ref = load_auth(tmp_path).referee()
        ref_nc = await connect(srv.url, name="referee", user=ref.user, password=ref.password)
        try:
            async with running(ref_nc, Subjects()) as worker:
                assert worker.service is not None
                sid = worker.service.service.id
                # Without the rights, the service's subscriptions are refused and nobody answers.
                reply = await ref_nc.request(f"$SRV.PING.{REFEREE_SERVICE}.{sid}", b"", timeout=10)
                assert json.loads(reply.data)["name"] == REFEREE_SERVICE
        finally:
            await ref_nc.close()
