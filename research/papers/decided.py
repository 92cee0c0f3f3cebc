"""Whose method decided each turn: per seat of a report cell, the share of its turns that its own
method did not decide, from the match records alone.

A turn is not the seat's own when
- the referee played it (`forced`: the `random` fault policy replaced a bad answer),
- the agent marked its move a fallback (`stats.fallback`: its LLM failed and it played a random legal
  move of its own),
- LLM calls inside the decision failed (e.g. LLM-MCTS's pruner or critic timed out, so the search
  ran without them, although a move of the method was sent): calls that brought no answer, from the
  move's `calls` (`failed_calls`); `stats.llm_failures` counts failed attempts, and a call answered
  on its retry is one of those but no failed call, or
- it gave no move at all (a fault that the policy did not replace: the `forfeit` or `retry` policy).
Unusable answers (`stats.bad_outputs`: an answer that names no legal move) are counted beside, not
in the share: they are the model's own play, which the paper's rules judge. So are the plays of a
match voided because the seat's LLM provider failed (`voided`, referee/worker.py): their turns are
not in the record, only that they happened.

Limits: one function (`move_origin`) reads a move's origin; a record trimmed to fit the bus
(`trimmed`) has lost its stats, and its moves count as the method's own. A move keeps its last
`MAX_MOVE_CALLS` calls: past that (and for a move without `calls`) the failed attempts that the
listed calls do not account for count as failed calls each, an upper bound. A call the client did
not send because the turn's time was spent leaves no trace in the record, so it is not counted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bus.protocol import MAX_MOVE_CALLS, MatchRecord, MoveRecord

Origin = Literal["own", "forced", "fallback", "failed_calls"]
FAILED = ("provider", "config")  # call outcomes without an answer (agents/llm/base.py)


def _extra(mv: MoveRecord) -> dict[str, object]:
    return dict(mv.stats.model_extra or {}) if mv.stats is not None else {}


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def failed_calls(mv: MoveRecord) -> int:
    """The move's LLM calls that brought no answer (see the module's limits)."""
    attempts = _count(_extra(mv).get("llm_failures"))
    calls = mv.calls or []
    failed = sum(1 for c in calls if c.outcome in FAILED)
    if calls and len(calls) < MAX_MOVE_CALLS:
        return failed  # every call is listed
    seen = sum(c.attempts if c.outcome in FAILED else max(0, c.attempts - 1) for c in calls)
    return failed + max(0, attempts - seen)


def move_origin(mv: MoveRecord) -> Origin:
    """Who decided this move: the seat's own method, the referee (`forced`), the agent's fallback,
    or the method with some of its LLM calls failed (`failed_calls`)."""
    extra = _extra(mv)
    if mv.forced:
        return "forced"
    if extra.get("fallback"):
        return "fallback"
    if failed_calls(mv):
        return "failed_calls"
    return "own"


class SeatShare(BaseModel):
    """One agent's turns in a cell's matches, by who decided them, and the model that played it."""

    model_config = ConfigDict(strict=True, extra="forbid")
    agent: str
    # From the records' provenance, when the seat asked an LLM at all: a policy table configured
    # with one for a fallback it never used played no model.
    models: list[str] = Field(default_factory=list)
    turns: int = Field(default=0, ge=0)  # moves made plus turns that produced no move
    forced: int = Field(default=0, ge=0)
    fallback: int = Field(default=0, ge=0)
    failed_calls: int = Field(default=0, ge=0)
    no_move: int = Field(default=0, ge=0)
    llm_calls: int = Field(default=0, ge=0)  # LLM requests answered
    llm_failures: int = Field(default=0, ge=0)  # LLM calls that brought no answer
    bad_outputs: int = Field(default=0, ge=0)  # answers the strategy could not use
    voided: int = Field(default=0, ge=0)  # plays of a match voided by its LLM provider's failure

    @property
    def not_own(self) -> int:
        return self.forced + self.fallback + self.failed_calls + self.no_move

    @property
    def share(self) -> float:
        """The share of its turns its own method did not decide (0 without turns)."""
        return self.not_own / self.turns if self.turns else 0.0

    def text(self) -> str:
        """e.g. `tot (openai:smollm2): 100% of 11 turns not its method's (11 forced by the referee)`."""
        who = f"{self.agent} ({', '.join(self.models)})" if self.models else self.agent
        parts = [
            f"{n} {what}"
            for n, what in (
                (self.forced, "forced by the referee"),
                (self.fallback, "its own fallbacks"),
                (self.failed_calls, "with failed LLM calls inside"),
                (self.no_move, "refused or missing answers"),
            )
            if n
        ]
        said = f"{who}: {100 * self.share:.0f}% of {self.turns} turns not its method's"
        said += f" ({', '.join(parts)})" if parts else ""
        calls = self.llm_calls + self.llm_failures
        if calls:
            said += f"; {self.llm_failures} of {calls} LLM calls failed"
        if self.bad_outputs:
            said += f"; {self.bad_outputs} unusable answers"
        if self.voided:
            said += f"; {self.voided} plays voided by its LLM provider's failure"
        return said


def seat_shares(records: Iterable[MatchRecord]) -> list[SeatShare]:
    """Every agent's SeatShare over `records`, in order of first appearance."""
    seats: dict[str, SeatShare] = {}

    def row(agent: str) -> SeatShare:
        return seats.setdefault(agent, SeatShare(agent=agent))

    for rec in records:
        for agent in rec.seats:
            row(agent)
        for void in rec.voided or ():
            row(void.agent).voided += 1
        for prov in rec.provenance:
            if prov.agent in seats:
                known = seats[prov.agent].models
                known += [m for m in prov.models if m not in known]
        for mv in rec.moves:
            if mv.player < 0 or mv.player >= len(rec.seats):
                continue  # chance
            s = row(mv.agent or rec.seats[mv.player])
            s.turns += 1
            origin = move_origin(mv)
            if origin != "own":
                setattr(s, origin, getattr(s, origin) + 1)
            extra = _extra(mv)
            s.llm_calls += mv.usage.llm_calls if mv.usage is not None else 0
            s.llm_failures += failed_calls(mv)
            s.bad_outputs += _count(extra.get("bad_outputs"))
        played = {(m.turn, m.player) for m in rec.moves if m.forced}
        for f in rec.faults:
            if (f.turn, f.seat) not in played:  # a forced move already counted the turn
                s = row(f.agent)
                s.turns += 1
                s.no_move += 1
    for s in seats.values():
        if not (s.llm_calls or s.llm_failures):
            s.models = []
    return list(seats.values())


def shares_text(seats: list[SeatShare]) -> str:
    """One line for a report cell: every seat's share, `; `-separated ('-' without seats)."""
    return "; ".join(s.text() for s in seats) or "-"
