"""The ladder's results in JetStream KV (referee/ladder/store.py), against the real nats-server:
a result delivered twice counts once, and a new connection (a restarted ladder) reads them all."""

from __future__ import annotations

import asyncio
import math
import socket
import subprocess
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError

from bus.connect import connect
from bus.process import die_with_parent, free_port, stop_process
from bus.server import find_binary
from referee.ladder.store import LadderResult, LadderStore, from_record, result_key
from tests.fixed_records import fixed_records


async def test_dedupe_and_restart(nats_url: str) -> None:
    bucket = f"LADDER_{uuid.uuid4().hex[:8]}"
    nc = await connect(nats_url, name="ladder-1")
    store = await LadderStore.open(nc.jetstream(), bucket)
    r = LadderResult(match_id="ladder-7", first="a", second="b", score=1.0)
    assert await store.record(r)
    assert not await store.record(r)  # redelivered: not counted again
    assert await store.record(LadderResult(match_id="ladder-8", first="b", second="a", score=0.5))
    await nc.drain()
    nc2 = await connect(nats_url, name="ladder-2")
    again = await LadderStore.open(nc2.jetstream(), bucket)
    assert await again.wins() == {("a", "b"): 1.5, ("b", "a"): 0.5}
    await nc2.drain()


async def test_every_listing_reads_every_result(nats_url: str) -> None:
    """Listing 300 stored results 200 times gives all 300 every time, and the keys deleted and
    purged are left out. nats.py's `kv.keys()`, which the store read before, came back empty in 51
    listings of 1,000 here on an idle machine: the ladder's audit then tested no pairings in a
    bucket full of results."""
    bucket = f"LADDER_{uuid.uuid4().hex[:8]}"
    nc = await connect(nats_url, name="ladder-listing")
    try:
        store = await LadderStore.open(nc.jetstream(), bucket)
        results = [LadderResult(match_id=f"m{i}", first="a", second="b", score=1.0) for i in range(302)]
        await asyncio.gather(*(store.record(r) for r in results))
        await store.kv.delete(result_key("m300"))
        await store.kv.purge(result_key("m301"))
        want = sorted(r.match_id for r in results[:300])
        short = []
        for i in range(200):
            got = [r.match_id for r in await store.results()]
            if got != want:
                short.append((i, len(got)))
        assert short == [], f"{len(short)} listings of 200 were not the 300 results: {short[:5]}"
        assert await store.pending() == []
    finally:
        await nc.drain()


def test_keys_and_validation() -> None:
    assert result_key("t/1") != result_key("t_2f_1") and result_key("t/1").startswith("result.")
    with pytest.raises(ValidationError):
        LadderResult(match_id="x", first="a", second="b", score=math.nan)
    with pytest.raises(ValidationError):
        LadderResult(match_id="x", first="a", second="b", score=2.0)


async def test_ladder_standings_reads_the_bucket(nats_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    from spielbus.cli import main

    bucket = f"LADDER_{uuid.uuid4().hex[:8]}"
    nc = await connect(nats_url, name="ladder-standings")
    store = await LadderStore.open(nc.jetstream(), bucket)
    for i in range(3):
        await store.record(LadderResult(match_id=f"m{i}", first="strong", second="weak", score=1.0))
    await nc.drain()
    code = await asyncio.to_thread(main, ["ladder", "standings", "--nats", nats_url, "--bucket", bucket])
    out = capsys.readouterr().out
    assert code == 0
    assert out.index("strong") < out.index("weak") and " 3 " in out


async def _listening(port: int) -> None:
    for _ in range(600):  # a loaded machine: wait on the port, up to a minute
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            await asyncio.sleep(0.1)
    raise AssertionError(f"nats-server did not listen on {port}")


async def test_results_survive_a_nats_restart(tmp_path: Path) -> None:
    """The same store folder, nats-server stopped and started again: nothing lost, no double count."""
    port = free_port()
    cmd = [find_binary(), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(tmp_path)]
    url = f"nats://127.0.0.1:{port}"
    r = LadderResult(match_id="ladder-1", first="a", second="b", score=1.0)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
    )
    try:
        await _listening(port)
        nc = await connect(url, name="ladder-before")
        assert await (await LadderStore.open(nc.jetstream())).record(r)
        await nc.close()
    finally:
        stop_process(proc, grace_s=10)
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=die_with_parent
    )
    try:
        await _listening(port)
        nc = await connect(url, name="ladder-after")
        store = await LadderStore.open(nc.jetstream())
        assert not await store.record(r)  # the redelivered result after the restart: counted once
        assert await store.wins() == {("a", "b"): 1.0, ("b", "a"): 0.0}
        await nc.close()
    finally:
        stop_process(proc, grace_s=10)


def test_from_record_scores_as_the_ratings_do() -> None:
    recs = fixed_records(40)
    two = [r for r in recs if len(r.seats) == 2 and r.outcome in ("decisive", "draw")]
    assert two
    for rec in two:
        res = from_record(rec)
        assert res is not None and res.match_id == rec.match_id
        assert {res.first, res.second} == set(rec.seats)
    many = [r for r in recs if len(r.seats) > 2]
    assert all(from_record(r) is None for r in many)
