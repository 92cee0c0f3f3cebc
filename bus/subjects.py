"""Subject and stream names of protocol v1. One place, so the prefix is configurable."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal, get_args

MATCHES_STREAM = "SPIELBUS_MATCHES"
SCHEDULE_STREAM = "SPIELBUS_SCHEDULE"
# The ladder's key-value bucket (referee/ladder/store.py); under accounts the referee may use this one.
LADDER_BUCKET = "SPIELBUS_LADDER"
# The `nats.micro` service name every referee worker registers (referee/service.py).
REFEREE_SERVICE = "spielbus-referee"
MatchEventType = Literal["started", "moved", "forfeit", "ended"]
MATCH_EVENTS: tuple[str, ...] = get_args(MatchEventType)  # one list: the Literal is the source

_TOKEN = re.compile(r"^[A-Za-z0-9_-]+$")
# Tokens become subjects, service names, file and folder names: keep them well under every limit
# (a 5,000-character agent name would hang the NATS connection).
MAX_TOKEN = 128


def check_token(value: str, what: str = "name", max_len: int = MAX_TOKEN) -> str:
    """Agent names and match ids become subject tokens: no dots, spaces or wildcards."""
    if len(value) > max_len:
        raise ValueError(f"{what} is {len(value)} characters long; at most {max_len} are allowed")
    if not _TOKEN.match(value):
        raise ValueError(f"{what} {value!r} may hold only letters, digits, '_' and '-'")
    return value


# Service names that belong to Spielbus's own processes. An agent registers a `nats.micro` service
# under its own name, and under accounts may answer `$SRV.*.<its name>`: an agent with one of these
# names could answer discovery for every referee worker (and be taken for one in provenance lookups).
RESERVED_AGENT_NAMES = frozenset({REFEREE_SERVICE})


def check_agent_name(value: str, max_len: int = MAX_TOKEN) -> str:
    """An agent name: a subject token that is not the name of one of Spielbus's own services."""
    check_token(value, "agent name", max_len=max_len)
    if value in RESERVED_AGENT_NAMES:
        raise ValueError(f"agent name {value!r} is reserved for Spielbus's own service; choose another")
    return value


# JetStream names (streams, key-value buckets): the server refuses '.', '*', '>', whitespace and path
# separators in a stream name; a bucket is letters, digits, '_' and '-' (nats.js / nats.go KV rule).
_STREAM_BAD = re.compile(r"[.*>\s/\\\x00-\x1f]")
MAX_STREAM_NAME = 64


def check_stream_name(value: str, what: str = "stream", *, kv: bool = False) -> str:
    """A JetStream stream name (or, `kv`, a key-value bucket name), checked before it reaches the
    server, whose refusal would come only at run time."""
    if not value or len(value) > MAX_STREAM_NAME:
        raise ValueError(f"{what} name must be 1 to {MAX_STREAM_NAME} characters long (got {len(value)})")
    if kv and not _TOKEN.match(value):
        raise ValueError(f"{what} name {value!r} may hold only letters, digits, '_' and '-'")
    if _STREAM_BAD.search(value):
        raise ValueError(f"{what} name {value!r} may not hold '.', '*', '>', spaces or path separators")
    return value


def _stream(base: str, prefix: str) -> str:
    """A stream's name under `prefix`: the base name for `spielbus`, else suffixed."""
    return base if prefix == "spielbus" else f"{base}_{prefix.upper()}"


def prefix_arg(text: str) -> str:
    """argparse type of `--prefix`: a subject prefix whose stream names are valid."""
    import argparse

    try:
        Subjects(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


@dataclass(frozen=True)
class Subjects:
    prefix: str = "spielbus"

    def __post_init__(self) -> None:
        # The prefix names the streams too (SPIELBUS_MATCHES_<PREFIX>): a single token.
        check_token(self.prefix, "subject prefix", max_len=32)
        check_stream_name(_stream(MATCHES_STREAM, self.prefix), "the match stream's")
        check_stream_name(_stream(SCHEDULE_STREAM, self.prefix), "the schedule stream's")

    def turn(self, agent: str) -> str:
        return f"{self.prefix}.turn.{check_token(agent, 'agent name')}"

    def notify(self, agent: str) -> str:
        return f"{self.prefix}.notify.{check_token(agent, 'agent name')}"

    def match(self, match_id: str, event: str) -> str:
        if event not in MATCH_EVENTS:
            raise ValueError(f"unknown match event {event!r}")
        return f"{self.prefix}.match.{check_token(match_id, 'match id')}.{event}"

    def match_all(self, event: str = "*") -> str:
        return f"{self.prefix}.match.*.{event}"

    def analysis(self, match_id: str) -> str:
        """Where `spielbus analyst` publishes its live verdicts on a match's moves (`move_verdict`)."""
        return f"{self.prefix}.analysis.{check_token(match_id, 'match id')}"

    def analysis_all(self) -> str:
        return f"{self.prefix}.analysis.*"

    @property
    def schedule(self) -> str:
        return f"{self.prefix}.schedule"

    @property
    def matches_stream(self) -> str:
        return _stream(MATCHES_STREAM, self.prefix)

    @property
    def schedule_stream(self) -> str:
        return _stream(SCHEDULE_STREAM, self.prefix)
