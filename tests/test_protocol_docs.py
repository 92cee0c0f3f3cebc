"""docs/protocol.md and docs/protocol.schema.json stay true to the models the referee uses."""

from __future__ import annotations

import json
import re
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

from bus.protocol import FAULT_REASONS, MESSAGES, FaultPolicy, Move, Turn
from bus.protocol_schema import schema_bundle
from bus.subjects import MATCH_EVENTS, Subjects

DOCS = Path(__file__).resolve().parents[1] / "docs"
DOC = (DOCS / "protocol.md").read_text(encoding="utf-8")
EXAMPLE = re.compile(r"<!-- message: (\w+) -->\n```json\n(.*?)\n```", re.S)


def test_published_schema_is_up_to_date() -> None:
    published = json.loads((DOCS / "protocol.schema.json").read_text(encoding="utf-8"))
    assert published == schema_bundle(), (
        "docs/protocol.schema.json is stale: regenerate it with "
        "`spielbus protocol schema > docs/protocol.schema.json`"
    )


def test_every_message_subject_fault_and_policy_is_documented() -> None:
    for name in MESSAGES:
        assert f"`{name}`" in DOC, name
    for reason in FAULT_REASONS:
        assert f"| `{reason}` |" in DOC, reason
    for kind in typing.get_args(FaultPolicy.model_fields["kind"].annotation):
        assert f"`{kind}`" in DOC, kind
    for event in MATCH_EVENTS:
        assert f"`{event}`" in DOC, event
    s = Subjects()
    for subject in ("spielbus.turn.<agent>", "spielbus.notify.<agent>", "spielbus.match.<match_id>.<event>"):
        assert f"`{subject}`" in DOC
    assert f"`{s.schedule}`" in DOC and s.matches_stream in DOC and s.schedule_stream in DOC
    for heading in (
        "## Timing and deadlines",
        "## Faults and what they cost",
        "## Versioning",
        "## A complete example exchange",
        "## Joining a tournament",
        "external = true",
    ):
        assert heading in DOC, heading


@pytest.mark.parametrize(("model", "section"), [(Turn, "### `turn`"), (Move, "### `move`")])
def test_every_field_is_in_its_table(model: type[BaseModel], section: str) -> None:
    start = DOC.index(section)
    table = DOC[start : DOC.index("\n### ", start + 1)]
    for field in model.model_fields:
        assert f"`{field}`" in table, f"{model.__name__}.{field} is not documented"


def test_example_exchange_is_valid_protocol() -> None:
    examples = EXAMPLE.findall(DOC)
    kinds = [k for k, _ in examples]
    assert {"turn", "move", "match_started", "match_ended", "match_event"} <= set(kinds)
    last_turn: Turn | None = None
    for kind, text in examples:
        raw = json.loads(text)
        model = MESSAGES[kind]
        msg = model.model_validate(raw)
        unknown = set(raw) - set(model.model_fields)
        assert not unknown, f"example {kind} has fields the protocol does not define: {unknown}"
        if isinstance(msg, Turn):
            last_turn = msg
        if isinstance(msg, Move):
            assert last_turn is not None and (msg.match_id, msg.turn) == (last_turn.match_id, last_turn.turn)


def test_unknown_fields_are_ignored_at_every_depth() -> None:
    """The forward-compatibility promise of the versioning section, on the referee's own models."""
    (turn_text,) = [t for k, t in EXAMPLE.findall(DOC) if k == "turn"][:1]
    raw = json.loads(turn_text)
    raw["x_new"] = {"a": [1, 2]}
    raw["game"]["x_variant"] = "fast"
    raw["legal_actions"][0]["x_hint"] = 0.3
    raw["history"][0]["x_time"] = 12
    turn = Turn.model_validate(raw)
    assert turn.game.name == "kuhn_poker" and turn.legal_actions[0].id == 0
    move = Move.model_validate({"match_id": "m", "turn": 1, "action": 0, "usage": {"x": 1}, "x_new": True})
    assert move.action == 0
