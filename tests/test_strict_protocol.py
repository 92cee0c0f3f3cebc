"""Strict validation of inbound messages (issue: the protocol was looser than its documentation).

`bus.replies.check_reply` is the one check the referee (`MatchRunner._request`) and
`bot-check` apply to a reply; these cases pin what it refuses and the documented
exceptions it keeps (ids as string keys of `policy`, integers where floats are expected,
unknown fields ignored). Pure: no bus needed.
"""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from bus.protocol import MatchEvent, MatchRecord, MoveRecord, Turn
from bus.replies import MAX_REPLY_BYTES, check_reply
from games.loader import parse_spec
from referee.botcheck import first_turn, record_problem

TURN = first_turn(parse_spec("tic_tac_toe"), "strict-1", ["a", "b"], 1000)


def _reply(**fields: object) -> dict[str, object]:
    return {"v": 1, "type": "move", "match_id": TURN.match_id, "turn": TURN.turn, "action": 4, **fields}


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"turn": "1"}, "turn"),
        ({"action": "3"}, "action"),
        ({"action": True}, "action"),
        ({"action": 4.0}, "action"),
        ({"turn": True}, "turn"),
        ({"match_id": 7}, "match_id"),
        ({"v": "1"}, "v"),
        ({"v": True}, "v"),
        ({"policy": {"4": "0.5"}}, "policy.4"),
        ({"policy": {"4": math.nan}}, "policy.4"),
        ({"policy": {"4": math.inf}}, "policy.4"),
        ({"policy": {"4": -math.inf}}, "policy.4"),
        ({"usage": {"llm_calls": -1}}, "usage.llm_calls"),
        ({"usage": {"prompt_tokens": "12"}}, "usage.prompt_tokens"),
        ({"usage": {"cache_hits": math.nan}}, "usage.cache_hits"),
        ({"stats": {"nodes": -5}}, "stats.nodes"),
        ({"stats": {"value": math.nan}}, "stats"),
        ({"stats": {"deep": [1, {"x": math.inf}]}}, "stats"),
        ({"note": 5}, "note"),
    ],
)
def test_a_lax_reply_is_malformed(fields: dict[str, object], where: str) -> None:
    raw = json.dumps(_reply(**fields)).encode()  # Python's json writes NaN and Infinity as bare words
    move, reason, detail = check_reply(TURN, raw)
    assert move is None and reason == "malformed", (fields, detail)
    assert f"at {where}" in detail


def test_1e400_is_not_a_number_we_keep() -> None:
    raw = json.dumps(_reply())[:-1].encode() + b', "policy": {"4": 1e400}}'
    move, reason, detail = check_reply(TURN, raw)
    assert move is None and reason == "malformed" and "finite" in detail


@pytest.mark.parametrize("missing", ["v", "type"])
def test_v_and_type_are_required_on_the_wire(missing: str) -> None:
    raw = json.dumps({k: x for k, x in _reply().items() if k != missing}).encode()
    move, reason, detail = check_reply(TURN, raw)
    assert move is None and reason == "malformed" and f"must carry {missing}" in detail


def test_an_unsupported_version_is_refused_naming_the_versions_spoken() -> None:
    move, reason, detail = check_reply(TURN, json.dumps(_reply(v=2)).encode())
    assert move is None and reason == "malformed"
    assert "protocol version 2 is not supported" in detail and "v1" in detail
    # An agent refuses a turn of another version too (our runtime answers it with a service error).
    raw = TURN.model_dump(mode="json")
    raw["v"] = 2
    with pytest.raises(ValidationError, match="not supported"):
        Turn.model_validate_json(json.dumps(raw))


def test_documented_exceptions_still_pass() -> None:
    """Ids as string keys, an integer probability, unknown fields at any depth, every optional field."""
    raw = _reply(
        policy={"4": 1, "0": 0.0},
        usage={"llm_calls": 1, "prompt_tokens": 10, "completion_tokens": 2, "cache_hits": 0, "x_new": 1},
        stats={"nodes": 3, "depth": 1, "pruned_illegal": 0, "custom": [1.5, {"ok": True}]},
        note="fine",
        x_future={"anything": [1, 2]},
    )
    move, reason, detail = check_reply(TURN, json.dumps(raw).encode())
    assert reason is None and move is not None, detail
    assert move.policy == {"4": 1.0, "0": 0.0}


def test_the_example_bots_replies_pass(tmp_path) -> None:
    """What examples/bots/python_bot.py and node_bot.js send: v, type, match_id, turn, action, note."""
    raw = {"v": 1, "type": "move", "match_id": TURN.match_id, "turn": TURN.turn, "action": 0, "note": "x"}
    move, reason, _ = check_reply(TURN, json.dumps(raw).encode())
    assert move is not None and reason is None


def test_oversize_and_service_errors() -> None:
    big = json.dumps(_reply(note="x" * MAX_REPLY_BYTES)).encode()
    assert check_reply(TURN, big)[1:] == ("malformed", f"reply of {len(big)} bytes exceeds {MAX_REPLY_BYTES}")
    move, reason, detail = check_reply(
        TURN, b"", {"Nats-Service-Error": "boom", "Nats-Service-Error-Code": "500"}
    )
    assert move is None and reason == "error" and "boom" in detail


def test_a_record_the_collector_would_refuse_is_named() -> None:
    """The record path bot-check runs: a non-finite policy that slipped into a record is caught."""
    move = MoveRecord(turn=1, player=0, action=4, text="x(1,1)", agent="a", policy={"4": 1.0})
    record = MatchRecord(
        match_id="strict-r", tournament="bot-check", game=TURN.game, seats=["a", "b"], seed=0, moves=[move]
    )
    assert record_problem(record) is None
    bad = record.model_copy(update={"moves": [move.model_copy(update={"policy": {"4": math.nan}})]})
    problem = record_problem(bad)
    assert problem is not None and "refused by the collector" in problem
    # The collector's own model refuses the same bytes the referee would publish.
    event = MatchEvent(type="ended", match_id="strict-r", tournament="t", game=TURN.game, seats=["a", "b"])
    data = event.model_copy(update={"record": bad}).model_dump_json(exclude_none=True)
    with pytest.raises(ValidationError):
        MatchEvent.model_validate_json(data)
