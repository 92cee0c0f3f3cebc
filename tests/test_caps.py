"""Caps on what an agent writes into records (referee/caps.py, issue 41): with about 1 MB of
service metadata and long notes on every move, the stored record keeps every move, the
provenance cut and saying so, each note cut with a marker; against a real nats-server and worker."""

from __future__ import annotations

from nats.aio.client import Client as NATS
from nats.micro import add_service
from nats.micro.service import ServiceConfig

from agents.random_agent import RandomStrategy
from bus.protocol import MatchEvent, Move, Provenance, Turn
from referee.caps import MAX_META_CHARS, MAX_MODELS, MAX_NOTE_CHARS, cap_note, cap_provenance
from referee.worker import RefereeWorker
from tests.helpers import raw_responder, serving, uid
from tests.reliability_helpers import make_specs


def test_caps() -> None:
    assert cap_note("short") == "short" and cap_note(None) is None
    long = cap_note("x" * 10_000)
    assert long is not None and long.startswith("x" * MAX_NOTE_CHARS) and "10000 characters" in long
    prov = Provenance.model_validate(
        {"agent": "a", "kind": "k" * 5000, "models": ["m"] * 100, "options_hash": "h"}
    )
    capped = cap_provenance(prov)
    assert capped.kind == "k" * MAX_META_CHARS and len(capped.models) == MAX_MODELS
    assert (capped.model_extra or {})["options_hash"] == "h"
    assert "kind: 256 of 5000" in (capped.model_extra or {})["truncated"]
    small = Provenance(agent="a", kind="k")
    assert cap_provenance(small) is small


async def test_huge_metadata_and_notes_keep_the_moves(nc: NATS) -> None:
    big, other = uid("big"), uid("oth")
    [spec] = make_specs(uid("caps"), "tic_tac_toe", [[big, other]])
    worker = RefereeWorker(nc)

    async def chatty(turn: Turn, msg: object) -> bytes:
        move = Move(
            match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[0].id, note="n" * 60_000
        )
        return move.model_dump_json().encode()

    # About 1 MB of metadata: the models string alone is 900 kB (the server's payload limit is 1 MiB).
    meta = {"kind": "bloat", "models": ",".join(f"model-{i:06d}" for i in range(70_000))}
    svc = await add_service(nc, ServiceConfig(name=big, version="1.0.0", metadata=meta))
    try:
        async with (
            serving(nc, RandomStrategy.from_options({"seed": 1}), other),
            raw_responder(nc, big, chatty),
        ):
            record = await worker.play(spec)
    finally:
        await svc.stop()
    msg = await nc.jetstream().get_last_msg("SPIELBUS_MATCHES", f"spielbus.match.{spec.match_id}.ended")
    stored = MatchEvent.model_validate_json(msg.data or b"").record
    assert stored is not None and record.moves
    assert len(stored.moves) == len(record.moves) and stored.trimmed is None  # every move, whole
    prov = next(p for p in stored.provenance if p.agent == big)
    assert len(prov.models) == MAX_MODELS and "70000" in (prov.model_extra or {})["truncated"]
    notes = [m.note for m in stored.moves if m.agent == big]
    assert notes and all(n and n.endswith("[note truncated: 60000 characters]") for n in notes)
