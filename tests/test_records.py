"""Match records are never lost: oversized ones are trimmed to fit the bus, the run folder keeps all."""

from __future__ import annotations

import asyncio

from bus.protocol import GameSpec, MatchEvent, MatchRecord, MoveRecord, trim_record
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee.run_folder import RunFolder
from referee.worker import EventPublisher
from tests.helpers import uid


def _big_record(match_id: str, moves: int = 300, note_bytes: int = 8000) -> MatchRecord:
    return MatchRecord(
        match_id=match_id,
        tournament="t",
        game=GameSpec(name="tic_tac_toe"),
        seats=["a", "b"],
        seed=1,
        moves=[
            MoveRecord(turn=i, player=i % 2, action=i % 9, text="x", note="n" * note_bytes)
            for i in range(moves)
        ],
        outcome="decisive",
        returns=[1, -1],
        ranks=[1, 2],
    )


def test_trim_keeps_moves_when_dropping_notes_suffices() -> None:
    rec = _big_record("m")
    out = trim_record(rec, 200_000)
    assert len(out.model_dump_json(exclude_none=True)) <= 200_000
    assert len(out.moves) == len(rec.moves) and all(m.note is None for m in out.moves)
    assert out.trimmed and "notes" in out.trimmed
    assert out.outcome == rec.outcome and out.returns == rec.returns


async def test_oversized_ended_event_still_reaches_the_stream(nc) -> None:
    subjects = Subjects()
    js = nc.jetstream()
    await ensure_streams(js, subjects)
    mid = uid("big")
    got: asyncio.Future[MatchEvent] = asyncio.get_running_loop().create_future()

    async def cb(msg) -> None:
        if not got.done():
            got.set_result(MatchEvent.model_validate_json(msg.data))

    sub = await js.subscribe(subjects.match(mid, "ended"), cb=cb, ordered_consumer=True)
    rec = _big_record(mid)
    assert len(rec.model_dump_json()) > nc.max_payload
    event = MatchEvent(type="ended", match_id=mid, tournament="t", game=rec.game, seats=rec.seats, record=rec)
    await EventPublisher(nc, subjects)(event)
    received = await asyncio.wait_for(got, 30)
    await sub.unsubscribe()
    assert received.record is not None and received.record.trimmed
    assert len(received.record.moves) == 300


def test_run_folder_appends_one_line_per_record(tmp_path) -> None:
    folder = RunFolder(tmp_path, "t-1")
    for i in range(3):
        folder.append(_big_record(f"m{i}", moves=2, note_bytes=1))
    folder.close()
    lines = (tmp_path / "t-1" / "matches.jsonl").read_text().splitlines()
    assert [MatchRecord.model_validate_json(x).match_id for x in lines] == ["m0", "m1", "m2"]


def test_an_unstorable_record_is_repaired_not_dropped() -> None:
    from bus.protocol import MoveStats
    from referee.records import repair_record, storable

    good = _big_record("ok", moves=2, note_bytes=1)
    assert repair_record(good) is good
    bad = _big_record("bad", moves=3, note_bytes=1)
    # The models refuse such values at the door; a record can still come to hold them (built
    # without validation, or by a future path), so the repair must not depend on the door.
    m = bad.moves
    m[0] = m[0].model_copy(update={"policy": {"0": float("nan"), "1": 0.5}})
    m[1] = m[1].model_copy(update={"stats": MoveStats.model_construct(nodes=3, q=float("inf"))})
    m[2] = m[2].model_copy(update={"note": "lone \udc80 surrogate"})
    assert not storable(bad)
    fixed = repair_record(bad)
    assert storable(fixed) and fixed.outcome == bad.outcome and len(fixed.moves) == 3
    assert fixed.moves[0].policy == {"1": 0.5} and fixed.moves[1].stats is not None
    assert fixed.moves[1].stats.nodes == 3
    assert fixed.repaired and "moves[0].policy" in fixed.repaired and "moves[2].note" in fixed.repaired
    # What reads back is the repaired record, exactly.
    assert MatchRecord.model_validate_json(fixed.model_dump_json()) == fixed
