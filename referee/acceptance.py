"""Which `ended` event is the final record of a match spec: the one rule every reader applies.

The live collector, `spielbus collect` and a referee deciding whether a redelivered spec was
already played all accept a stored `ended` event only when it is the record of that spec: the
same match id, tournament, game and seats, and the spec's chance secret, which only the referee
account can read from the work queue. Under accounts (bus/auth.py) only the referee account can
store a match event at all; this check is the second wall, and on an open bus the only one.
"""

from __future__ import annotations

from bus.protocol import MatchEvent, MatchSpec


def record_problem(spec: MatchSpec, event: MatchEvent) -> str | None:
    """Why `event` is not a valid final record of `spec` (None: it is)."""
    rec = event.record
    if event.type != "ended" or rec is None:
        return "not an ended event with a record"
    if rec.match_id != spec.match_id or event.match_id != spec.match_id:
        return "match id differs from the spec"
    if rec.tournament != spec.tournament or list(rec.seats) != list(spec.seats):
        return "tournament or seats differ from the spec"
    if rec.game.label() != spec.game.label():
        return "game differs from the spec"
    if spec.secret is not None and rec.secret != spec.secret:
        return "chance secret differs from the spec (not played by a referee of this schedule)"
    return None
