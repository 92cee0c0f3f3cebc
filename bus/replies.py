"""Judging a reply to a `turn`: the one check the referee and `bot-check` share.

Pure protocol code, no transport: given the turn that was sent and the raw reply
(bytes and headers), say whether it is a well-formed `move` for that turn, and if
not, which fault it is (`error`, `malformed`) with a short detail. Legality of the
named action is the caller's business (it needs the game), as are the transport
faults (`timeout`, `no_responder`), which never produce a reply.

Limits: a reply over `MAX_REPLY_BYTES` is refused unread; the detail is cut to
`MAX_DETAIL` characters so a hostile reply cannot bloat the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from pydantic import ValidationError

from bus.protocol import FaultReason, Move


class TurnKey(Protocol):
    """What a reply is checked against: the turn's match and number (a `Turn`, or the referee's
    `referee.turns.EncodedTurn`)."""

    @property
    def match_id(self) -> str: ...

    @property
    def turn(self) -> int: ...


# Replies larger than this are refused unread: no legal move needs more. (The NATS
# server refuses anything over its own `max_payload`, 1 MiB by default, before we see it.)
MAX_REPLY_BYTES = 64 * 1024
MAX_DETAIL = 300

SERVICE_ERROR_HEADERS = ("Nats-Service-Error", "Nats-Service-Error-Code")
# The service error code an agent answers with when a turn's time ran out on its side.
TIMEOUT_CODE = "504"


def check_reply(
    turn: TurnKey, data: bytes, headers: Mapping[str, str] | None = None
) -> tuple[Move | None, FaultReason | None, str]:
    """(move, None, "") for a well-formed move answering `turn`, else (None, reason, detail)."""
    headers = headers or {}
    if any(h in headers for h in SERVICE_ERROR_HEADERS):
        said = headers.get("Nats-Service-Error", "") or headers.get("Nats-Service-Error-Code", "")
        if headers.get("Nats-Service-Error-Code") == TIMEOUT_CODE:
            # The agent says its own time ran out (a strategy that overran, a turn that reached it
            # late, a person who closed the seat page): a fault against itself, named for what it is.
            return None, "timeout", f"agent says its time ran out: {said}"[:MAX_DETAIL]
        return None, "error", f"agent error: {said}"[:MAX_DETAIL]
    if len(data) > MAX_REPLY_BYTES:
        return None, "malformed", f"reply of {len(data)} bytes exceeds {MAX_REPLY_BYTES}"
    try:
        move = Move.model_validate_json(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "top level"
        return None, "malformed", f"{first.get('msg', 'invalid')} at {where}"[:MAX_DETAIL]
    wrong = wrong_turn(turn, move)
    if wrong is not None:
        return None, "malformed", wrong
    return move, None, ""


def wrong_turn(turn: TurnKey, move: Move) -> str | None:
    """Why `move` does not answer `turn` (another match or turn number), or None when it does."""
    if move.match_id == turn.match_id and move.turn == turn.turn:
        return None
    detail = (
        f"reply is for match {move.match_id!r} turn {move.turn}, expected {turn.match_id!r} turn {turn.turn}"
    )
    return detail[:MAX_DETAIL]
