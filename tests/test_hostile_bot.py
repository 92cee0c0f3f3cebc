"""A tournament against a hostile bot ends, with every match recorded exactly once.

Before strict validation, one `NaN` in a reply's `policy` was accepted by the referee, put in
the record, refused later by the collector, and `run`/`submit` waited forever. Here a bot
answers every mode of lax or hostile reply (non-finite numbers, strings for numbers, booleans
for ids, an unsupported version, no `type`, negative usage, huge replies) through the real
path: work queue, referee worker, JetStream, collector. Each bad reply must be a recorded
`malformed` fault and the tournament must finish (bounded wait: a hang fails the test).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

from nats.aio.msg import Msg

from bus.connect import flush
from bus.protocol import FaultPolicy, MatchRecord, Turn
from bus.subjects import Subjects
from referee.collector import submit_and_collect
from referee.worker import RefereeWorker
from tests.helpers import spec, uid

Bad = Callable[[Turn], bytes]


def _move(t: Turn, **fields: object) -> dict[str, object]:
    return {
        "v": 1,
        "type": "move",
        "match_id": t.match_id,
        "turn": t.turn,
        "action": t.legal_actions[0].id,
        **fields,
    }


def _raw(t: Turn, tail: bytes) -> bytes:
    return json.dumps(_move(t)).encode()[:-1] + b", " + tail + b"}"


MODES: list[tuple[str, Bad]] = [
    (
        "NaN policy",
        lambda t: json.dumps(_move(t, policy={str(t.legal_actions[0].id): float("nan")})).encode(),
    ),
    ("Infinity policy", lambda t: json.dumps(_move(t, policy={"0": float("inf")})).encode()),
    ("1e400 policy", lambda t: _raw(t, b'"policy": {"0": 1e400}')),
    ("NaN in stats", lambda t: _raw(t, b'"stats": {"nodes": 1, "value": NaN}')),
    ("negative usage", lambda t: json.dumps(_move(t, usage={"llm_calls": -1})).encode()),
    ("1e400 usage", lambda t: _raw(t, b'"usage": {"prompt_tokens": 1e400}')),
    ("turn as string", lambda t: json.dumps(_move(t, turn=str(t.turn))).encode()),
    ("action as string", lambda t: json.dumps(_move(t, action=str(t.legal_actions[0].id))).encode()),
    ("action as true", lambda t: json.dumps(_move(t, action=True)).encode()),
    ("version 2", lambda t: json.dumps(_move(t, v=2)).encode()),
    ("no type", lambda t: json.dumps({k: v for k, v in _move(t).items() if k != "type"}).encode()),
    ("no version", lambda t: json.dumps({k: v for k, v in _move(t).items() if k != "v"}).encode()),
    ("huge", lambda t: json.dumps(_move(t, note="x" * 200_000)).encode()),
]


async def test_a_hostile_bot_cannot_stall_a_tournament(nc) -> None:
    subjects = Subjects(uid("hostile").replace("-", "_"))
    bad, good = uid("bad"), uid("good")
    asked = {"n": 0}

    async def hostile(msg: Msg) -> None:
        turn = Turn.model_validate_json(msg.data)
        i = asked["n"]
        asked["n"] += 1
        await msg.respond(MODES[i % len(MODES)][1](turn))

    async def fine(msg: Msg) -> None:
        await msg.respond(json.dumps(_move(Turn.model_validate_json(msg.data))).encode())

    # `random`: every fault is recorded and the match goes on, so each match meets several modes.
    specs = [
        spec("tic_tac_toe", [bad, good] if k % 2 == 0 else [good, bad], policy=FaultPolicy(kind="random"))
        for k in range(6)
    ]
    records: list[MatchRecord] = []
    worker = RefereeWorker(nc, subjects=subjects, concurrency=3)
    subs = [
        await nc.subscribe(subjects.turn(bad), queue=bad, cb=hostile),
        await nc.subscribe(subjects.turn(good), queue=good, cb=fine),
    ]
    await flush(nc)
    task = asyncio.create_task(worker.run())
    try:
        collect = submit_and_collect(nc, specs, subjects, records.append)
        got = await asyncio.wait_for(collect, timeout=120)  # before the fix: it never returned
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=60)
        for sub in subs:
            await sub.unsubscribe()
    assert sorted(r.match_id for r in got) == sorted(s.match_id for s in specs)
    assert len(records) == len(specs)  # each exactly once
    faults = [f for r in got for f in r.faults]
    assert asked["n"] >= len(MODES)  # every mode was sent at least once
    assert faults and all(f.reason == "malformed" and f.agent == bad for f in faults), faults[:3]
    assert len(faults) == asked["n"]
    for r in got:
        assert r.outcome in ("decisive", "draw")
        for m in r.moves:
            assert m.policy is None and (m.usage is None or m.usage.llm_calls >= 0)
