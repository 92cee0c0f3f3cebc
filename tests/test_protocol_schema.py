"""docs/asyncapi.json and docs/protocol.schema.json: generated from the code, accepted by
off-the-shelf validators, and true to the bytes a real run puts on the bus.

The AsyncAPI document is checked against the AsyncAPI Initiative's own 3.0.0 meta-schema
(tests/data/asyncapi/README.md says where it comes from); the JSON Schema bundle with `jsonschema`'s
draft 2020-12 validator, resolved by its `$id`. The real messages are those of the golden capture
(tests/data/golden_matches.jsonl: every request, reply, notification and event of seeded matches
through the real referee on a real nats-server, prefix `golden`)."""

from __future__ import annotations

import copy
import gzip
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft7Validator, Draft202012Validator, validators
from pydantic import ValidationError
from referencing import Registry
from referencing.jsonschema import DRAFT7, DRAFT202012

from bus.asyncapi import ROUTES, Route, asyncapi_document
from bus.protocol import MESSAGES
from bus.protocol_schema import SCHEMA_ID, wire_messages
from bus.subjects import MATCH_EVENTS, Subjects

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
DATA = Path(__file__).resolve().parent / "data"
GOLDEN_PREFIX = "golden"


def asyncapi_meta_schema() -> dict[str, Any]:
    raw = gzip.decompress((DATA / "asyncapi" / "3.0.0-without-id.json.gz").read_bytes())
    schema: dict[str, Any] = json.loads(raw)
    return schema


def bundle_validator(model: str | None = None) -> Draft202012Validator:
    """A validator for the published bundle (or one model of it), found the way any tool would: by `$id`."""
    bundle = json.loads((DOCS / "protocol.schema.json").read_text(encoding="utf-8"))
    registry: Registry[Any] = Registry().with_resource(SCHEMA_ID, DRAFT202012.create_resource(bundle))
    ref = SCHEMA_ID if model is None else f"{SCHEMA_ID}#/$defs/{model}"
    return Draft202012Validator({"$ref": ref}, registry=registry)


def payload_validator(document: dict[str, Any], route: Route, message: str) -> Draft7Validator:
    """Checks what the AsyncAPI document says `message` on `route` carries (draft-07 based schemas)."""
    channels = document["channels"]
    channel = channels[f"{route.channel}_reply"] if message in route.reply else channels[route.channel]
    ref = channel["messages"][message]["$ref"]  # -> #/components/messages/<name>
    payload = document["components"]["messages"][ref.rsplit("/", 1)[1]]["payload"]["$ref"]
    registry: Registry[Any] = Registry().with_resource("urn:asyncapi", DRAFT7.create_resource(document))
    return Draft7Validator({"$ref": f"urn:asyncapi{payload}"}, registry=registry)


def route_of(subject: str) -> Route:
    found = []
    for route in ROUTES:
        pattern = re.sub(r"\\\{\w+\\\}", "[A-Za-z0-9_-]+", re.escape(route.address(GOLDEN_PREFIX)))
        if re.fullmatch(pattern, subject):
            found.append(route)
    assert len(found) == 1, f"{subject} matches {len(found)} channels of the AsyncAPI document"
    return found[0]


def golden_messages() -> Iterator[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """(subject, message, replies) of every captured message, clocks made real again."""
    for line in (DATA / "golden_matches.jsonl").read_text(encoding="utf-8").splitlines():
        for subject, messages in json.loads(line)["bus"].items():
            for m in messages:
                data = m["data"]
                if isinstance(data, dict) and data.get("sent_at") == 0:
                    # The capture zeroes the clock fields; a real turn's `sent_at` is a positive epoch time.
                    data["sent_at"] = 1_700_000_000.5
                yield subject, data, [r["data"] for r in m.get("replies", [])]


def test_asyncapi_document_is_up_to_date() -> None:
    published = json.loads((DOCS / "asyncapi.json").read_text(encoding="utf-8"))
    assert published == asyncapi_document(), (
        "docs/asyncapi.json is stale: regenerate it with `spielbus protocol asyncapi > docs/asyncapi.json`"
    )


def test_asyncapi_document_is_valid_asyncapi_3() -> None:
    validator = Draft7Validator(asyncapi_meta_schema())
    document = asyncapi_document()
    assert [e.message for e in validator.iter_errors(document)] == []
    # The meta-schema is alive: a wrong action, a missing version, a broken payload schema are refused.
    for path, value in (
        (("operations", "turn", "action"), "publish"),
        (("info", "version"), None),
        (("components", "schemas", "Turn", "type"), 5),
    ):
        broken = copy.deepcopy(document)
        *parents, key = path
        node = broken
        for p in parents:
            node = node[p]
        if value is None:
            del node[key]
        else:
            node[key] = value
        assert not validator.is_valid(broken), path


def test_every_subject_and_message_of_the_code_is_in_the_document() -> None:
    called: set[str] = set()

    class Recording(Subjects):
        def __getattribute__(self, name: str) -> Any:
            if not name.startswith("_") and name != "prefix":
                called.add(name)
            return super().__getattribute__(name)

    recording = Recording()
    called.clear()  # what the constructor's own checks read (the stream names) is no route's
    for route in ROUTES:
        route.subject(recording)
    # Every member that builds one concrete subject (not the wildcard, not stream names).
    assert called == {"turn", "notify", "match", "analysis", "schedule"}
    assert {r.channel for r in ROUTES if r.messages == ("match_event",)} == {
        f"match_{e}" for e in MATCH_EVENTS
    }
    carried = {m for r in ROUTES for m in (*r.messages, *r.reply)}
    assert carried == set(wire_messages())
    document = asyncapi_document()
    assert set(document["components"]["messages"]) == carried
    assert {m.__name__ for m in MESSAGES.values()} <= set(document["components"]["schemas"])


def test_the_bundle_is_a_draft_2020_12_schema() -> None:
    bundle = json.loads((DOCS / "protocol.schema.json").read_text(encoding="utf-8"))
    assert bundle["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert bundle["$id"] == SCHEMA_ID
    assert {m.__name__ for m in MESSAGES.values()} <= set(bundle["$defs"])
    assert validators.validator_for(bundle) is Draft202012Validator
    Draft202012Validator.check_schema(bundle)


def test_real_bus_messages_validate_where_the_document_says_they_go() -> None:
    document = asyncapi_document()
    any_message = bundle_validator()
    seen: set[str] = set()
    replies_checked = 0
    for subject, data, replies in golden_messages():
        route = route_of(subject)
        name = "match_event" if data["type"] in MATCH_EVENTS else data["type"]
        assert name in route.messages, (subject, name)
        assert name != "match_event" or route.channel == f"match_{data['type']}", subject
        assert MESSAGES[name].model_validate_json(json.dumps(data))  # the referee sent it: the models agree
        for validator in (
            any_message,
            bundle_validator(MESSAGES[name].__name__),
            payload_validator(document, route, name),
        ):
            errors = [e.message for e in validator.iter_errors(data)]
            assert not errors, (subject, errors)
        seen.add(route.channel)
        # Bots' replies, hostile ones included: the schema never refuses what the model takes.
        for reply in replies:
            (reply_name,) = route.reply
            try:
                MESSAGES[reply_name].model_validate_json(json.dumps(reply))
            except ValidationError:
                continue
            replies_checked += 1
            assert payload_validator(document, route, reply_name).is_valid(reply), reply
            assert bundle_validator("Move").is_valid(reply), reply
    # Specs are not captured; verdicts come from the analyst, not the referee (tests/test_live_analysis.py).
    assert seen == {r.channel for r in ROUTES} - {"schedule", "analysis"}
    assert replies_checked > 20


def test_records_and_specs_validate() -> None:
    for line in (DATA / "golden_matches.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)["record"]
        assert bundle_validator("MatchRecord").is_valid(record)
    spec = {
        "v": 1,
        "type": "match_spec",
        "match_id": "m-1",
        "tournament": "t",
        "game": {"name": "kuhn_poker", "params": {}},
        "seats": ["a", "b"],
        "seed": 3,
        "policy": {"kind": "retry", "retries": 1},
    }
    MESSAGES["match_spec"].model_validate_json(json.dumps(spec))
    assert bundle_validator().is_valid(spec) and bundle_validator("MatchSpec").is_valid(spec)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"turn": "1"}, "no coercion of numbers"),
        ({"v": None}, "v is required"),
        ({"type": "tunr"}, "an unknown type"),
        ({"legal_actions": [{"id": 0}]}, "a legal action needs its text"),
        ({"deadline_ms": 2.5}, "an integer field"),
    ],
)
def test_the_schema_refuses_what_the_models_refuse(change: dict[str, Any], why: str) -> None:
    _, turn, _ = next(m for m in golden_messages() if m[1].get("type") == "turn")
    bad = {**turn, **change}
    bad = {k: v for k, v in bad.items() if v is not None}
    with pytest.raises(ValidationError):
        MESSAGES["turn"].model_validate_json(json.dumps(bad))
    assert not bundle_validator().is_valid(bad), why
