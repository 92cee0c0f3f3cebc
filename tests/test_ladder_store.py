"""The ladder's results in JetStream KV (referee/ladder_store.py), against the real nats-server:
a result delivered twice counts once, and a new connection (a restarted ladder) reads them all."""

from __future__ import annotations

import math
import uuid

import pytest
from pydantic import ValidationError

from bus.connect import connect
from referee.ladder_store import LadderResult, LadderStore, result_key


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


def test_keys_and_validation() -> None:
    assert result_key("t/1") != result_key("t_2f_1") and result_key("t/1").startswith("result.")
    with pytest.raises(ValidationError):
        LadderResult(match_id="x", first="a", second="b", score=math.nan)
    with pytest.raises(ValidationError):
        LadderResult(match_id="x", first="a", second="b", score=2.0)


async def test_ladder_standings_reads_the_bucket(nats_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

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
