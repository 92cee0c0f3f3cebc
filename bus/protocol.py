"""Protocol v1: every message that crosses the bus, as pydantic models.

Pure data: no transport here. Unknown fields are ignored on receipt so that a
newer peer can add fields; a missing or mistyped required field is a malformed
message (`pydantic.ValidationError`). `bus.protocol_schema` makes the JSON Schema of
every model in `MESSAGES` from these models, `bus.asyncapi` the AsyncAPI document.

Validation is strict (pydantic strict mode, `WIRE`): no coercion, so `"turn": "1"`,
`"action": "3"` and `"action": true` are refused, and every number must be finite
(`NaN`, `Infinity` and `1e400` are refused, also inside free-form fields such as
`stats` extras and `observation_json`). The exceptions, all forced by JSON itself:
object keys are strings (so `policy` maps ids written as strings), and an integer is
accepted where a float is expected. Every JSON message must carry `v` and `type`;
`v` must be a version this side speaks (`SUPPORTED_VERSIONS`, only 1), otherwise the
message is refused with a detail naming the versions spoken. Python callers may still
omit `v` and `type` (they default), only JSON input must name them.
"""

from __future__ import annotations

import math
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from bus.subjects import MatchEventType, check_token

PROTOCOL_VERSION = 1
# Versions this side accepts on receipt. Negotiation is by refusal: a peer that sends
# another `v` gets a `malformed` fault (or a service error, for a bot) naming these.
SUPPORTED_VERSIONS: tuple[int, ...] = (1,)

# Every wire model: strict types, finite floats, unknown fields ignored.
WIRE = ConfigDict(extra="ignore", strict=True, allow_inf_nan=False)


def check_finite(value: Any, where: str = "value", depth: int = 0) -> Any:
    """Refuse NaN and infinities anywhere inside a free-form JSON value (lists, objects, numbers)."""
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where}: numbers must be finite, got {value}")
    elif depth < 64 and isinstance(value, dict):
        for k, v in value.items():
            check_finite(v, f"{where}.{k}", depth + 1)
    elif depth < 64 and isinstance(value, list | tuple):
        for i, v in enumerate(value):
            check_finite(v, f"{where}[{i}]", depth + 1)
    return value


# `budget` (a v1 addition): the seat's LLM calls or tokens went over the tournament's budget.
FaultReason = Literal["timeout", "illegal", "malformed", "no_responder", "error", "budget"]
FAULT_REASONS: tuple[str, ...] = get_args(FaultReason)  # one list: the Literal is the source


def _require_v_and_type(schema: dict[str, Any]) -> None:
    rest = [k for k in schema.get("required", []) if k not in ("v", "type")]
    schema["required"] = ["v", "type", *rest]


class Message(BaseModel):
    """Base of all wire messages: `v` is the protocol version."""

    # JSON input must name `v` and `type` (see `_wire_names_version_and_type`); say so in the schema.
    model_config = ConfigDict(**WIRE, json_schema_extra=_require_v_and_type)
    v: int = Field(default=PROTOCOL_VERSION, description="Protocol version; only 1 is spoken.")

    @model_validator(mode="before")
    @classmethod
    def _wire_names_version_and_type(cls, data: Any, info: ValidationInfo) -> Any:
        if info.mode == "json" and isinstance(data, dict):
            missing = [k for k in ("v", "type") if k not in data]
            if missing:
                raise ValueError(f"a {cls.__name__} message must carry {' and '.join(missing)}")
        return data

    @field_validator("v")
    @classmethod
    def _spoken_version(cls, v: int) -> int:
        if v not in SUPPORTED_VERSIONS:
            spoken = ", ".join(str(x) for x in SUPPORTED_VERSIONS)
            raise ValueError(f"protocol version {v} is not supported (this side speaks v{spoken})")
        return v


class GameSpec(BaseModel):
    """An OpenSpiel game by name and parameters, e.g. connect_four or kuhn_poker(players=3)."""

    # Ignore, not forbid: it travels inside `turn` and `match_started`, where unknown fields must be
    # ignored (a newer referee may describe games further). The tournament file checks its own keys.
    model_config = WIRE
    name: str
    params: dict[str, bool | int | float | str] = Field(default_factory=dict)

    def label(self) -> str:
        if not self.params:
            return self.name
        inner = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return f"{self.name}({inner})"


class LegalAction(BaseModel):
    model_config = WIRE
    id: int
    text: str


class HistoryItem(BaseModel):
    """One step of the match as a seat may know it.

    `player` is the seat that acted (-1 chance, -2 simultaneous joint move);
    `action` and `text` are null where the step is hidden from this seat.
    """

    model_config = WIRE
    player: int
    action: int | None = None
    text: str | None = None


class Usage(BaseModel):
    model_config = WIRE
    llm_calls: int = Field(
        default=0,
        ge=0,
        description="LLM requests answered (failed ones are in the move's stats, not here).",
    )
    prompt_tokens: int = Field(default=0, ge=0)
    completion_tokens: int = Field(default=0, ge=0)
    cache_hits: int = Field(default=0, ge=0)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_hits=self.cache_hits + other.cache_hits,
        )


class MoveStats(BaseModel):
    model_config = ConfigDict(**{**WIRE, "extra": "allow"})
    nodes: int | None = Field(default=None, ge=0)
    depth: int | None = Field(default=None, ge=0)
    pruned_illegal: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _finite_extras(self) -> MoveStats:
        check_finite(self.__pydantic_extra__ or {}, "stats")
        return self


class Turn(Message):
    """Referee to agent, on `spielbus.turn.<agent>`: choose an action."""

    type: Literal["turn"] = "turn"
    match_id: str
    game: GameSpec
    seat: int
    seats: list[str]
    turn: int
    deadline_ms: int
    observation: str
    observation_json: Any | None = None
    legal_actions: list[LegalAction]
    history: list[HistoryItem] = Field(default_factory=list)
    state: list[int] | None = Field(
        default=None,
        description="Perfect-information games only: the full action history from the initial "
        "state (chance outcomes included); replaying it rebuilds the true state.",
    )
    rules: str | None = None
    retry: str | None = None
    match_seed: int | None = Field(
        default=None,
        description="A per-match value (v1 addition) from the tournament's seed and the match's place "
        "in its schedule: different between matches, the same in a rerun. Seeded agents mix it into "
        "their decisions so that two of them meeting twice play two games. Never the chance secret.",
    )
    # Training only (docs/env.md): sent to the seats a match spec's `tensors` names, never otherwise,
    # so every other turn keeps its bytes.
    information_state_tensor: list[float] | None = Field(
        default=None,
        description="Optional, off by default: OpenSpiel's information_state_tensor(seat), where the game "
        "has one, only for seats the match asks tensors for (training environments).",
    )
    observation_tensor: list[float] | None = Field(
        default=None,
        description="Optional, off by default: OpenSpiel's observation_tensor(seat), where the game has "
        "one, only for seats the match asks tensors for (training environments).",
    )
    sent_at: float | None = Field(
        default=None,
        allow_inf_nan=False,
        gt=0,
        description="When the referee sent this turn (Unix epoch seconds): the deadline ends at "
        "sent_at + deadline_ms / 1000 on the referee's clock.",
    )

    @field_validator("observation_json")
    @classmethod
    def _finite_observation(cls, value: Any) -> Any:
        return check_finite(value, "observation_json")


class Move(Message):
    """Agent to referee, the reply to a `turn`. Give `action` (an id) or `action_text`."""

    type: Literal["move"] = "move"
    match_id: str
    turn: int
    action: int | None = None
    action_text: str | None = None
    policy: dict[str, float] | None = Field(
        default=None, description="Optional distribution over legal action ids (keys are ids as strings)."
    )
    usage: Usage = Field(default_factory=Usage)
    stats: MoveStats | None = None
    note: str | None = None


# A header `spielbus bot-check` sets on the odd notifications it sends on purpose (an unknown
# type, bytes that are not JSON): an agent that ignores them need not warn about them.
PROBE_HEADER = "Spielbus-Probe"


class MatchStarted(Message):
    """Referee to agent, on `spielbus.notify.<agent>`."""

    type: Literal["match_started"] = "match_started"
    match_id: str
    game: GameSpec
    seat: int
    seats: list[str]


class MatchEnded(Message):
    type: Literal["match_ended"] = "match_ended"
    match_id: str
    seat: int
    returns: list[float]
    outcome: str
    # v1 additions, sent only when the game reached its end (`decisive` or `draw`) and absent
    # otherwise: the seat's last view, so that a bot learns how the game ended (the step after
    # its last turn), e.g. to check its own model of the game on the final state.
    history: list[HistoryItem] | None = Field(
        default=None,
        description="Only when the game reached its end (v1 addition): the whole history as this "
        "seat may know it, as a turn would show it (steps hidden from the seat without action and text).",
    )
    observation: str | None = Field(
        default=None,
        description="Only when the game reached its end (v1 addition): the seat's observation of the "
        "final state, the text a turn's `observation` would hold.",
    )


class MoveRecord(BaseModel):
    """One applied step of a match, as kept in the record."""

    model_config = WIRE
    turn: int
    player: int
    action: int
    text: str
    agent: str | None = None
    latency_ms: float | None = None
    usage: Usage | None = None
    stats: MoveStats | None = None
    note: str | None = None
    policy: dict[str, float] | None = None
    forced: bool = Field(default=False, description="Played by the referee for the seat (random policy).")


class FaultRecord(BaseModel):
    model_config = WIRE
    turn: int
    seat: int
    agent: str
    reason: FaultReason
    detail: str = ""
    latency_ms: float | None = None


class Provenance(BaseModel):
    model_config = ConfigDict(**{**WIRE, "extra": "allow"})
    agent: str
    kind: str | None = None
    version: str | None = None
    models: list[str] = Field(default_factory=list)
    config_hash: str | None = None

    @model_validator(mode="after")
    def _finite_extras(self) -> Provenance:
        check_finite(self.__pydantic_extra__ or {}, "provenance")
        return self


class BudgetLimits(BaseModel):
    """Caps on LLM use (None: no cap). `tokens` caps prompt plus completion tokens."""

    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    llm_calls: int | None = Field(default=None, ge=0)
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)


class Budget(BaseModel):
    """A seat's LLM budget, a time control next to the clock (referee/budget.py enforces it)."""

    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    per_move: BudgetLimits = Field(default_factory=BudgetLimits)
    per_match: BudgetLimits = Field(default_factory=BudgetLimits)
    label: str | None = Field(default=None, description="Budget class shown in standings; None: derived.")


class MatchRecord(BaseModel):
    """The complete record of one match: one line of `matches.jsonl`."""

    model_config = WIRE
    match_id: str
    tournament: str
    game: GameSpec
    seats: list[str]
    seed: int
    moves: list[MoveRecord] = Field(default_factory=list)
    faults: list[FaultRecord] = Field(default_factory=list)
    returns: list[float] = Field(default_factory=list)
    outcome: str = "pending"
    forfeited: list[int] = Field(default_factory=list)
    ranks: list[int] = Field(default_factory=list, description="Finishing place per seat, 1 is best.")
    started_at: float = 0.0
    ended_at: float = 0.0
    provenance: list[Provenance] = Field(default_factory=list)
    error: str | None = None
    trimmed: str | None = Field(
        default=None, description="What was left out to fit the bus's maximum message size, if anything."
    )
    secret: str | None = Field(
        default=None,
        description="The match's chance secret, revealed when the match ends: with `attempt` it "
        "replays every chance outcome (docs/referee.md).",
    )
    attempt: int = Field(default=1, description="Which attempt at the match this record ends (1 first).")
    repaired: str | None = Field(
        default=None, description="What the referee changed so the record could be stored, if anything."
    )
    budgets: dict[str, Budget] | None = Field(
        default=None,
        description="The LLM budget each seat played under, absent when no seat had one (v1 addition).",
    )
    training: bool | None = Field(
        default=None, description="True for a match played through a training environment (docs/env.md)."
    )


def trim_record(record: MatchRecord, limit: int) -> MatchRecord:
    """A copy of `record` that serializes within `limit` bytes, dropping the least essential parts first."""
    stages: list[tuple[str, dict[str, None]]] = [
        ("per-move policies, stats and notes", {"policy": None, "stats": None, "note": None}),
        (
            "per-move policies, stats, notes and usage",
            {"policy": None, "stats": None, "note": None, "usage": None},
        ),
    ]
    for what, blank in stages:
        moves = [m.model_copy(update=blank) for m in record.moves]
        out = record.model_copy(update={"moves": moves, "trimmed": what})
        if len(out.model_dump_json(exclude_none=True)) <= limit:
            return out
    return record.model_copy(
        update={"moves": [], "trimmed": "every move (the record exceeded the bus limit)"}
    )


class MatchEvent(Message):
    """Referee to everyone, on `spielbus.match.<match_id>.<event>`, kept in `SPIELBUS_MATCHES`."""

    type: MatchEventType
    match_id: str
    tournament: str
    game: GameSpec
    seats: list[str]
    move: MoveRecord | None = Field(
        default=None, description="`moved`: the step (hidden steps carry no action)."
    )
    hidden: bool = Field(
        default=False, description="`moved`: the step is private to its seat until the match ends."
    )
    fault: FaultRecord | None = None
    observation: str | None = Field(default=None, description="Public view of the state after this event.")
    record: MatchRecord | None = Field(default=None, description="`ended` only: the full record.")
    attempt: int = Field(
        default=1,
        description="The attempt at the match this event belongs to; events of a lower attempt than a "
        "later `started` belong to an aborted attempt and are void.",
    )


class FaultPolicy(BaseModel):
    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    kind: Literal["forfeit", "retry", "random"] = "forfeit"
    retries: int = Field(default=2, ge=0, description="`retry`: extra attempts before forfeiting.")


class MatchSpec(Message):
    """Tournament to referee workers, on the `SPIELBUS_SCHEDULE` work queue."""

    type: Literal["match_spec"] = "match_spec"
    match_id: str
    tournament: str
    game: GameSpec
    seats: list[str]
    seed: int
    deadline_ms: int = 10_000
    policy: FaultPolicy = Field(default_factory=FaultPolicy)
    max_turns: int = Field(default=2_000, description="A match that reaches this many turns ends as a draw.")
    secret: str | None = Field(
        default=None,
        description="Seeds the match's chance outcomes; random per match, known to referees only "
        "(a referee draws one when absent). `seed` alone never decides chance.",
    )
    budgets: dict[str, Budget] = Field(
        default_factory=dict, description="LLM budget per seat name (absent: unlimited); v1 addition."
    )
    training: bool | None = Field(
        default=None, description="Played through a training environment (docs/env.md): marked in the record."
    )
    tensors: list[str] | None = Field(
        default=None,
        description="Agent names whose turns carry OpenSpiel tensors (docs/env.md); absent: none do.",
    )

    @field_validator("match_id", "tournament")
    @classmethod
    def _token(cls, v: str, info: ValidationInfo) -> str:
        return check_token(v, info.field_name or "name")

    @field_validator("seats")
    @classmethod
    def _seat_tokens(cls, v: list[str]) -> list[str]:
        # Seat names become subject tokens (`<prefix>.turn.<seat>`): refuse them here, not mid-match.
        return [check_token(s, "seat name") for s in v]


MESSAGES: dict[str, type[BaseModel]] = {
    "turn": Turn,
    "move": Move,
    "match_started": MatchStarted,
    "match_ended": MatchEnded,
    "match_event": MatchEvent,
    "match_spec": MatchSpec,
    "match_record": MatchRecord,
}
