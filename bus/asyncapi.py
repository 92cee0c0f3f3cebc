"""The AsyncAPI 3 document of protocol v1, generated from the models and the subject map.

`ROUTES` is the subject map: which subject (built by `bus.subjects.Subjects`, with a placeholder
token per parameter, so the address is the code's own) carries which messages of
`bus.protocol.MESSAGES`, and what the referee does there. `asyncapi_document()` turns it into an
AsyncAPI 3.0.0 document (`spielbus protocol asyncapi`, kept in `docs/asyncapi.json`); the
payloads are the models' JSON Schemas under `components.schemas`.

The document describes the referee's side (AsyncAPI describes one application): it *sends*
turns (and receives the `move` reply on the request's inbox), notifications and match events,
and *receives* match specs. A bot is the mirror image on the turn and notify channels.

Limits: addresses use the default prefix `spielbus` (`--prefix` changes every subject); NATS
micro discovery (`$SRV.PING`/`INFO`/`STATS`) is the client libraries' protocol, not ours, and is
only named in the description; the JetStream storage of events (which events a stream keeps)
is said in each channel's description, not in a binding.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from bus.protocol import MESSAGES, PROTOCOL_VERSION
from bus.protocol_schema import component_schemas
from bus.subjects import MATCH_EVENTS, Subjects

ASYNCAPI_VERSION = "3.0.0"
_PLACEHOLDER = "-PARAM"  # a valid subject token suffix, replaced by `{name}` in the address
_PARAM = re.compile(rf"([A-Za-z_]+){_PLACEHOLDER}")


def param(name: str) -> str:
    """The placeholder token for parameter `name`, to pass to a `Subjects` method."""
    return f"{name}{_PLACEHOLDER}"


@dataclass(frozen=True)
class Route:
    """One subject of the protocol and what travels on it."""

    channel: str  # the AsyncAPI channel id
    subject: Callable[[Subjects], str]  # the code's own subject, placeholders for parameters
    messages: tuple[str, ...]  # names in MESSAGES
    action: Literal["send", "receive"]  # what the referee does on it
    summary: str
    reply: tuple[str, ...] = ()  # request/reply: the reply's messages, on the request's inbox
    params: tuple[tuple[str, str], ...] = ()  # (name, description) of each parameter

    def address(self, prefix: str = "spielbus") -> str:
        """The AsyncAPI address: the subject with `{name}` for each parameter."""
        return _PARAM.sub(r"{\1}", self.subject(Subjects(prefix)))


_AGENT = ("agent", "The agent name: letters, digits, '_' and '-' (it is also the bot's micro service name).")
_MATCH = ("match_id", "The match id: letters, digits, '_' and '-'.")
_STORED = "Stored in the JetStream stream SPIELBUS_MATCHES."


def _event_route(event: str) -> Route:
    stored = event != "moved"
    return Route(
        channel=f"match_{event}",
        subject=lambda s: s.match(param("match_id"), event),
        messages=("match_event",),
        action="send",
        summary=f"Match event `{event}`, referee to spectators. "
        + (_STORED if stored else "A plain publish per step for live watchers, not stored."),
        params=(_MATCH,),
    )


ROUTES: tuple[Route, ...] = (
    Route(
        channel="turn",
        subject=lambda s: s.turn(param("agent")),
        messages=("turn", "compact_turn"),
        action="send",
        summary="A turn, referee to agent, as a request: the reply (on the request's inbox) is a move. "
        "Bots subscribe in queue group <agent>, through a NATS micro service named <agent>. An agent "
        "whose discovery metadata says turns=compact gets compact_turn in perfect-information games.",
        reply=("move",),
        params=(_AGENT,),
    ),
    Route(
        channel="notify",
        subject=lambda s: s.notify(param("agent")),
        messages=("match_started", "match_ended"),
        action="send",
        summary="Match start and end, referee to every replica of an agent; plain publishes, no reply.",
        params=(_AGENT,),
    ),
    *(_event_route(event) for event in MATCH_EVENTS),
    Route(
        channel="analysis",
        subject=lambda s: s.analysis(param("match_id")),
        messages=("move_verdict",),
        action="send",
        summary="A move's verdict while its match is played, `spielbus analyst` to spectators (the live "
        "page's evaluation bar); a plain publish, not stored, advisory: the referee does not read it.",
        params=(_MATCH,),
    ),
    Route(
        channel="schedule",
        subject=lambda s: s.schedule,
        messages=("match_spec",),
        action="receive",
        summary="Match specs, tournament to referee workers, on the JetStream work queue "
        "SPIELBUS_SCHEDULE (internal to Spielbus: bots never see it).",
    ),
)


def _message(name: str) -> dict[str, Any]:
    model = MESSAGES[name]
    out: dict[str, Any] = {
        "name": name,
        "title": model.__name__,
        "contentType": "application/json",
        "payload": {"$ref": f"#/components/schemas/{model.__name__}"},
    }
    if model.__doc__:
        out["summary"] = model.__doc__.strip().splitlines()[0]
    return out


def _channel(route: Route) -> dict[str, Any]:
    out: dict[str, Any] = {
        "address": route.address(),
        "summary": route.summary,
        "messages": {m: {"$ref": f"#/components/messages/{m}"} for m in route.messages},
    }
    if route.params:
        out["parameters"] = {name: {"description": text} for name, text in route.params}
    return out


def _operation(route: Route) -> dict[str, Any]:
    out: dict[str, Any] = {
        "action": route.action,
        "channel": {"$ref": f"#/channels/{route.channel}"},
        "summary": route.summary,
        "messages": [{"$ref": f"#/channels/{route.channel}/messages/{m}"} for m in route.messages],
    }
    if route.reply:
        reply_channel = f"{route.channel}_reply"
        out["reply"] = {
            "channel": {"$ref": f"#/channels/{reply_channel}"},
            "messages": [{"$ref": f"#/channels/{reply_channel}/messages/{m}"} for m in route.reply],
        }
    return out


def asyncapi_document() -> dict[str, Any]:
    """The AsyncAPI 3.0.0 document of protocol v1 (docs/asyncapi.json)."""
    channels: dict[str, Any] = {}
    for route in ROUTES:
        channels[route.channel] = _channel(route)
        if route.reply:
            channels[f"{route.channel}_reply"] = {
                "address": None,  # the request's inbox, chosen by the requester at run time
                "summary": f"The reply to a {route.messages[0]} request, on the request's inbox.",
                "messages": {m: {"$ref": f"#/components/messages/{m}"} for m in route.reply},
            }
    carried = sorted({m for r in ROUTES for m in (*r.messages, *r.reply)})
    return {
        "asyncapi": ASYNCAPI_VERSION,
        "info": {
            "title": "Spielbus referee",
            "version": str(PROTOCOL_VERSION),
            "description": "Protocol v1 of Spielbus, an arena where game-playing agents play under one "
            "referee over NATS, seen from the referee (a bot is the mirror image on the turn and "
            "notify channels). Whole contract, timing and faults: docs/protocol.md. Bots register "
            "a NATS micro service named after the agent, found with $SRV.PING/INFO/STATS.",
            "license": {"name": "Apache-2.0"},
        },
        "defaultContentType": "application/json",
        "servers": {
            "local": {
                "host": "localhost:4222",
                "protocol": "nats",
                "description": "The NATS server of a local run (`spielbus run`); any NATS server serves.",
            }
        },
        "channels": channels,
        "operations": {route.channel: _operation(route) for route in ROUTES},
        "components": {
            "messages": {name: _message(name) for name in carried},
            "schemas": component_schemas("#/components/schemas/{model}"),
        },
    }
