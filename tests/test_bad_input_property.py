"""Property: whatever an agent answers, the referee records a fault and keeps a complete record.

Hypothesis generates plans of bad replies (random bytes, huge payloads, deep JSON,
wrong types, out-of-range ids, unknown texts, stale or foreign turns, service errors).
Each plan drives one short tic-tac-toe match under the `retry` policy: seat 0 answers
its first requests with the plan, then plays legally. Every bad reply must become
exactly one fault of the expected reason, and the match must still end normally with
a record whose moves replay to its returns and that survives the collector's path
(`referee.botcheck.record_problem`, what `bot-check` runs). Lax replies a coercing parser
would take (`"turn": "1"`, `"action": true`, NaN, `1e400`, `v: 2`, no `type`) are `malformed`.
One connection and one responder serve every example; a few hundred matches, a few thousand replies.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from bus.connect import connect, flush
from bus.protocol import FaultPolicy, MatchRecord, Turn
from games.loader import load_game
from referee.botcheck import record_problem
from referee.match import MAX_REPLY_BYTES
from tests.helpers import play, spec, uid

BAD, GOOD = uid("fuzzbad"), uid("fuzzgood")

# A bad reply: given the turn, the bytes to answer (or headers for a service error),
# and the fault reasons it may legitimately be recorded as.
Reply = Callable[[Turn], bytes]


@dataclass
class Bad:
    kind: str
    make: Reply
    reasons: frozenset[str]
    error_header: bool = False


@dataclass
class Responder:
    plan: list[Bad] = field(default_factory=list)
    asked: int = 0


def _move(turn: Turn, **fields: object) -> dict[str, object]:
    return {"v": 1, "type": "move", "match_id": turn.match_id, "turn": turn.turn, **fields}


def _json(obj: object) -> bytes:
    return json.dumps(obj).encode()


MALFORMED = frozenset({"malformed"})
ILLEGAL = frozenset({"illegal"})

random_bytes = st.binary(min_size=0, max_size=2048).map(lambda b: Bad("random bytes", lambda t: b, MALFORMED))
huge = st.integers(MAX_REPLY_BYTES + 1, 900_000).map(
    lambda n: Bad("huge", lambda t: b'{"pad": "' + b"x" * n + b'"}', MALFORMED)
)
deep = st.tuples(st.integers(300, 20_000), st.sampled_from(["[", '{"a":'])).map(
    lambda d: Bad(
        "deep json",
        lambda t: (d[1] * d[0] + "1" + ("]" if d[1] == "[" else "}") * d[0]).encode(),
        MALFORMED,
    )
)
deep_in_move = st.integers(300, 5_000).map(
    lambda d: Bad(
        "deep json in a move",
        lambda t: (
            _json(_move(t, action=t.legal_actions[0].id))[:-1] + b', "x": ' + b"[" * d + b"]" * d + b"}"
        ),
        MALFORMED,
    )
)
not_coercible = st.one_of(
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.text(alphabet="abcxyz !?", min_size=1, max_size=8),
    st.floats(allow_nan=False).filter(lambda f: not f.is_integer()),
)
wrong_type = (
    st.tuples(st.sampled_from(["match_id", "turn", "action", "usage", "policy", "v"]), not_coercible)
    # A string is a valid match id, and an object a valid usage or policy (all fields optional).
    .filter(lambda kv: not (kv[0] == "match_id" and isinstance(kv[1], str)))
    .filter(lambda kv: not (kv[0] in ("usage", "policy") and isinstance(kv[1], dict)))
    .map(
        lambda kv: Bad(
            f"wrong type for {kv[0]}",
            lambda t: _json({**_move(t, action=t.legal_actions[0].id), kv[0]: kv[1]}),
            MALFORMED,
        )
    )
)
missing = st.sampled_from(["match_id", "turn"]).map(
    lambda k: Bad(
        f"missing {k}",
        lambda t: _json({x: y for x, y in _move(t, action=t.legal_actions[0].id).items() if x != k}),
        MALFORMED,
    )
)
not_a_move = st.sampled_from(["turn", "match_started", 7, None]).map(
    lambda ty: Bad("wrong message type", lambda t: _json({**_move(t, action=0), "type": ty}), MALFORMED)
)
# tic-tac-toe ids are 0..8: anything else is out of range.
out_of_range = st.one_of(st.integers(max_value=-1), st.integers(min_value=9, max_value=10**300)).map(
    lambda a: Bad("out-of-range id", lambda t: _json(_move(t, action=a)), ILLEGAL)
)
unknown_text = st.text(alphabet="abcdefgh 123", max_size=20).map(
    lambda s: Bad("unknown text", lambda t: _json(_move(t, action_text=s)), ILLEGAL)
)
no_action = st.just(Bad("no action", lambda t: _json(_move(t)), ILLEGAL))
stale = (
    st.integers(min_value=-5, max_value=5)
    .filter(lambda k: k != 0)
    .map(
        lambda k: Bad(
            "stale or future turn",
            lambda t: _json({**_move(t, action=t.legal_actions[0].id), "turn": t.turn + k}),
            MALFORMED,
        )
    )
)
foreign = st.text(alphabet="abc-_0123", min_size=1, max_size=12).map(
    lambda m: Bad(
        "another match",
        lambda t: _json({**_move(t, action=t.legal_actions[0].id), "match_id": m}),
        MALFORMED,
    )
)
# Strict validation: what a lax parser would coerce or let through is `malformed`.
_LAX: list[tuple[str, Callable[[Turn], dict[str, object]]]] = [
    ("turn as a string", lambda t: {"turn": str(t.turn)}),
    ("action as a string", lambda t: {"action": str(t.legal_actions[0].id)}),
    ("action as true", lambda t: {"action": True}),
    ("turn as a float", lambda t: {"turn": float(t.turn)}),
    ("unsupported version", lambda t: {"v": 2}),
    ("version as true", lambda t: {"v": True}),
    ("NaN in policy", lambda t: {"policy": {str(t.legal_actions[0].id): float("nan")}}),
    ("Infinity in policy", lambda t: {"policy": {str(t.legal_actions[0].id): float("inf")}}),
    ("negative usage", lambda t: {"usage": {"llm_calls": -1}}),
    ("NaN in stats", lambda t: {"stats": {"nodes": 1, "value": float("nan")}}),
]
lax = st.sampled_from(_LAX).map(
    lambda kv: Bad(
        kv[0],
        lambda t: _json({**_move(t, action=t.legal_actions[0].id), **kv[1](t)}),
        MALFORMED,
    )
)
huge_number = st.sampled_from(["policy", "usage"]).map(
    lambda where: Bad(
        f"1e400 in {where}",
        lambda t: (
            _json(_move(t, action=t.legal_actions[0].id))[:-1]
            + (b', "policy": {"0": 1e400}}' if where == "policy" else b', "usage": {"prompt_tokens": 1e400}}')
        ),
        MALFORMED,
    )
)
no_version_or_type = st.sampled_from(["v", "type"]).map(
    lambda k: Bad(
        f"no {k}",
        lambda t: _json({x: y for x, y in _move(t, action=t.legal_actions[0].id).items() if x != k}),
        MALFORMED,
    )
)
service_error = st.text(max_size=50).map(
    lambda s: Bad("service error", lambda t: s.encode(), frozenset({"error"}), error_header=True)
)

bad_reply = st.one_of(
    random_bytes,
    huge,
    deep,
    deep_in_move,
    wrong_type,
    missing,
    not_a_move,
    out_of_range,
    unknown_text,
    no_action,
    stale,
    foreign,
    service_error,
    lax,
    huge_number,
    no_version_or_type,
)


@pytest.fixture(scope="module")
def bus(nats_url: str) -> Iterator[tuple[asyncio.AbstractEventLoop, NATS, Responder]]:
    """One private loop, one connection, one bad and one good responder for every example."""
    loop = asyncio.new_event_loop()
    nc: NATS = loop.run_until_complete(connect(nats_url, name="fuzz"))
    responder = Responder()

    async def bad(msg: Msg) -> None:
        turn = Turn.model_validate_json(msg.data)
        i = responder.asked
        responder.asked += 1
        if i < len(responder.plan):
            item = responder.plan[i]
            if item.error_header:
                await nc.publish(
                    msg.reply,
                    b"",
                    headers={
                        "Nats-Service-Error": item.make(turn).decode(),
                        "Nats-Service-Error-Code": "500",
                    },
                )
            else:
                await nc.publish(msg.reply, item.make(turn))
        else:
            await msg.respond(_json(_move(turn, action=turn.legal_actions[0].id)))

    async def good(msg: Msg) -> None:
        turn = Turn.model_validate_json(msg.data)
        await msg.respond(_json(_move(turn, action=turn.legal_actions[-1].id)))

    async def subscribe() -> None:
        await nc.subscribe(f"spielbus.turn.{BAD}", queue=BAD, cb=bad)
        await nc.subscribe(f"spielbus.turn.{GOOD}", queue=GOOD, cb=good)
        await flush(nc)

    loop.run_until_complete(subscribe())
    yield loop, nc, responder
    loop.run_until_complete(nc.close())
    loop.close()


def _replays(record: MatchRecord) -> None:
    """The record is complete: its moves replay from the initial state to its returns."""
    state = load_game(record.game).new_initial_state()
    for m in record.moves:
        assert m.text
        state.apply_action(m.action)
    assert state.is_terminal()
    assert [float(r) for r in state.returns()] == record.returns


@pytest.mark.slow
@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plan=st.lists(bad_reply, min_size=1, max_size=12))
def test_every_bad_reply_is_a_recorded_fault(bus, plan: list[Bad]) -> None:
    loop, nc, responder = bus
    responder.plan, responder.asked = plan, 0
    match = spec("tic_tac_toe", [BAD, GOOD], policy=FaultPolicy(kind="retry", retries=len(plan)))
    record = loop.run_until_complete(play(nc, match))
    assert record.error is None, record.error
    assert record.outcome in ("decisive", "draw"), record
    assert len(record.faults) == len(plan), [(f.reason, f.detail) for f in record.faults]
    for fault, item in zip(record.faults, plan, strict=True):
        assert fault.seat == 0 and fault.agent == BAD
        assert fault.reason in item.reasons, (item.kind, fault.reason, fault.detail)
        assert len(fault.detail) <= 4400
    assert [f.turn for f in record.faults] == list(range(1, len(plan) + 1))
    assert record.moves[0].turn == len(plan) + 1 and record.moves[0].agent == BAD
    _replays(record)
    # The record path bot-check runs: the collector would store this record as it is.
    assert record_problem(record) is None
