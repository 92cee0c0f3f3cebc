"""JSON Schema of protocol v1, generated from the pydantic models in `bus.protocol`.

`schema_bundle()` is `docs/protocol.schema.json`: one JSON Schema 2020-12 document with
`$schema`, `$id` and every model under `$defs` (keyed by model name: `Turn`, `Move`, ...).
The root accepts any message that travels with a `type` (`oneOf` the seven wire messages, told
apart by `type`); to check one kind, validate against `<$id>#/$defs/<Model>`.
`message_schema(name)` is one message on its own (`spielbus protocol schema --message turn`).
`component_schemas(ref_template)` gives the same definitions for another document (AsyncAPI).

Limits: JSON Schema cannot say everything the models check. Strict types come free (JSON has
no coercion to refuse), but the finiteness of numbers inside free-form objects, the token rules
of names in `match_spec` and the version check beyond `v` being an integer are the models' alone;
a message the schema accepts may still be refused by the referee, never the other way round.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from bus.protocol import MESSAGES, PROTOCOL_VERSION, Message

DIALECT = "https://json-schema.org/draft/2020-12/schema"
# A name, not an address: nothing is served there. Validators resolve `$ref`s against it offline.
SCHEMA_ID = f"urn:spielbus:protocol:v{PROTOCOL_VERSION}"


def _models() -> list[type[BaseModel]]:
    return list(MESSAGES.values())


def component_schemas(ref_template: str) -> dict[str, Any]:
    """Every model of `MESSAGES` and what they contain, by model name, with `$ref`s in `ref_template`."""
    _, top = models_json_schema([(m, "validation") for m in _models()], ref_template=ref_template)
    defs: dict[str, Any] = top["$defs"]
    return defs


def wire_messages() -> dict[str, type[Message]]:
    """The messages that travel on a subject with a `type` (`match_record` is carried, not sent)."""
    return {name: m for name, m in MESSAGES.items() if issubclass(m, Message)}


def schema_bundle() -> dict[str, Any]:
    """`docs/protocol.schema.json`: every model under `$defs`, the root any wire message."""
    return {
        "$schema": DIALECT,
        "$id": SCHEMA_ID,
        "title": f"Spielbus protocol v{PROTOCOL_VERSION}",
        "description": "Every message of the Spielbus protocol (docs/protocol.md). The root accepts "
        "any message sent on the bus; validate one kind against #/$defs/<Model> "
        + "("
        + ", ".join(f"{name}: {m.__name__}" for name, m in MESSAGES.items())
        + ").",
        "oneOf": [{"$ref": f"#/$defs/{m.__name__}"} for m in wire_messages().values()],
        "$defs": component_schemas("#/$defs/{model}"),
    }


def message_schema(name: str) -> dict[str, Any]:
    """One message's schema, standalone (its own `$defs`); KeyError for an unknown name."""
    return {"$schema": DIALECT, "$id": f"{SCHEMA_ID}:{name}", **MESSAGES[name].model_json_schema()}
