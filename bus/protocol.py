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
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_validator,
)

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
# `provider` (a v1 addition): the seat's LLM provider failed the decision (outage, rate limit, hang),
# as the agent says in its move's `failure`; the `[policy] provider` rule decides, not `kind`.
FaultReason = Literal["timeout", "illegal", "malformed", "no_responder", "error", "budget", "provider"]
FAULT_REASONS: tuple[str, ...] = get_args(FaultReason)  # one list: the Literal is the source


def _require_v_and_type(schema: dict[str, Any]) -> None:
    rest = [k for k in schema.get("required", []) if k not in ("v", "type")]
    schema["required"] = ["v", "type", *rest]


class Message(BaseModel):
    """Base of all wire messages: `v` is the protocol version."""

    # JSON input must name `v` and `type` (see `_wire_names_version_and_type`); say so in the schema.
    model_config = ConfigDict(**WIRE, json_schema_extra=_require_v_and_type)
    v: int = Field(default=PROTOCOL_VERSION, description="Protocol version; only 1 is spoken.")

    # After validation, not before: a `before` validator hands pydantic the JSON as Python objects
    # (every dict, list and string built first), which cost a quarter of a turn's validation.
    @model_validator(mode="after")
    def _wire_names_version_and_type(self, info: ValidationInfo) -> Any:
        if info.mode == "json":
            missing = [k for k in ("v", "type") if k not in self.model_fields_set]
            if missing:
                raise ValueError(f"a {type(self).__name__} message must carry {' and '.join(missing)}")
        return self

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


def _add_optional(a: float | None, b: float | None) -> Any:
    """Sum of two optional figures: None only when neither side reported one."""
    if a is None:
        return b
    return a if b is None else a + b


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
    # v1 additions, absent (not 0) when nothing reported them, so older usage keeps its bytes.
    reasoning_tokens: int | None = Field(
        default=None,
        ge=0,
        description="Thinking tokens, where the provider reports them (v1 addition); usually also "
        "inside completion_tokens.",
    )
    cost_usd: float | None = Field(
        default=None, ge=0, description="Dollars the calls cost by the agent's price table (v1 addition)."
    )
    unknown_usage_calls: int | None = Field(
        default=None,
        ge=0,
        description="Calls whose reply carried no usage: tokens estimated or unknown (v1 addition).",
    )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            llm_calls=self.llm_calls + other.llm_calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            cache_hits=self.cache_hits + other.cache_hits,
            reasoning_tokens=_add_optional(self.reasoning_tokens, other.reasoning_tokens),
            cost_usd=_add_optional(self.cost_usd, other.cost_usd),
            unknown_usage_calls=_add_optional(self.unknown_usage_calls, other.unknown_usage_calls),
        )


# How every LLM reply ends, classified once by the LLM layer (docs/llm.md): `provider` (transport,
# timeout, 408/409/429/5xx, a 200 that is not a completion), `config` (a 4xx the endpoint will always
# give), `filtered` (content filter), `truncated` (cut at the token limit), `answered`.
CallOutcome = Literal["provider", "config", "filtered", "truncated", "answered"]
CALL_OUTCOMES: tuple[str, ...] = get_args(CallOutcome)
# Bounds of what a move may carry about its LLM calls: the reply must stay small (bus/replies.py).
MAX_CALL_REASONING = 4000
MAX_CALL_ANSWER = 1000
MAX_MOVE_CALLS = 32
MAX_CAUSE = 500


class LLMCall(BaseModel):
    """One LLM call behind a move (v1 addition): its id in the agent's call store, how it ended, its
    tokens and cost, and the start of its thinking and answer (the whole text is in the call store)."""

    model_config = WIRE
    id: str = Field(max_length=128, description="The call's id in the agent's LLM call store.")
    outcome: CallOutcome
    status: int | None = Field(default=None, ge=0, le=999, description="HTTP status of the last attempt.")
    finish_reason: str | None = Field(default=None, max_length=64)
    attempts: int = Field(
        default=1, ge=0, le=1000, description="Requests sent for this call, retries included."
    )
    waited_s: float = Field(
        default=0.0, ge=0, le=86_400, description="Seconds spent waiting: backoff and provider limits."
    )
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)
    tokens_estimated: bool = Field(default=False, description="The reply had no usage: tokens are estimated.")
    tokens_estimated_by: Literal["tokenizer", "server", "chars"] | None = Field(
        default=None,
        description="How: a local tokenizer, the endpoint's tokenize route, or 4 characters a token.",
    )
    cost_usd: float | None = Field(default=None, ge=0)
    reasoning_chars: int | None = Field(
        default=None, ge=0, description="Size of the whole thinking text (the call store holds it)."
    )
    reasoning: str | None = Field(
        default=None, max_length=MAX_CALL_REASONING, description="The thinking, its first 4000 characters."
    )
    answer: str | None = Field(
        default=None, max_length=MAX_CALL_ANSWER, description="The answer, its first 1000 characters."
    )

    @classmethod
    def from_summary(cls, raw: dict[str, Any]) -> LLMCall:
        """A call from the LLM layer's summary dict (`agents.base.Decision.calls`), its texts cut to the
        bounds above and `reasoning_chars` the full thinking's size. Raises `ValidationError` for a bad
        summary."""
        data = dict(raw)
        reasoning = data.get("reasoning")
        if isinstance(reasoning, str):
            data.setdefault("reasoning_chars", len(reasoning))
            data["reasoning"] = reasoning[:MAX_CALL_REASONING]
        if isinstance(data.get("answer"), str):
            data["answer"] = data["answer"][:MAX_CALL_ANSWER]
        return cls.model_validate(data)


class MoveFailure(BaseModel):
    """Why an agent sends no action (v1 addition): its decision failed for its LLM provider's reasons,
    not the model's. The referee records fault `provider` and applies `[policy] provider`."""

    model_config = WIRE
    kind: Literal["provider"] = "provider"
    cause: str = Field(max_length=MAX_CAUSE, description="What the provider did (status, error).")
    calls: list[str] = Field(
        default_factory=list, max_length=MAX_MOVE_CALLS, description="Ids of the failed calls."
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
    budget: TurnBudget | None = Field(
        default=None,
        description="The seat's LLM budget for this decision (v1 addition, like the clock): absent when "
        "the seat has none, so a turn without a budget keeps its bytes.",
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


# Discovery metadata (`$SRV.INFO`) by which an agent asks for compact turns: `"turns": "compact"`.
TURN_FORM_KEY = "turns"
COMPACT = "compact"


class CompactTurn(Message):
    """Referee to agent, on `spielbus.turn.<agent>`, instead of `turn` (v1 addition): what an engine
    reads, for agents that declare `"turns": "compact"` in their discovery metadata. Perfect-information
    games only (elsewhere such an agent gets full turns): the true action list and the legal ids, with
    no observation, legal-action texts, history or rules. Answer it with a `move` as a `turn`."""

    type: Literal["compact_turn"] = "compact_turn"
    match_id: str
    game: GameSpec
    seat: int
    seats: list[str]
    turn: int
    deadline_ms: int
    legal_ids: list[int] = Field(description="The legal action ids (answer with one as `action`).")
    state: list[int] = Field(
        description="The full action history from the initial state (chance outcomes included); "
        "replaying it rebuilds the true state."
    )
    retry: str | None = None
    match_seed: int | None = Field(default=None, description="As in `turn`.")
    budget: TurnBudget | None = Field(default=None, description="As in `turn`.")
    sent_at: float | None = Field(default=None, allow_inf_nan=False, gt=0, description="As in `turn`.")


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
    calls: list[LLMCall] | None = Field(
        default=None, max_length=MAX_MOVE_CALLS, description="The LLM calls behind the move (v1 addition)."
    )
    failure: MoveFailure | None = Field(
        default=None,
        description="Instead of an action (v1 addition): the decision failed for the LLM provider's "
        "reasons. Recorded as fault `provider`; `[policy] provider` decides (void, forfeit, random).",
    )


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
    calls: list[LLMCall] | None = Field(
        default=None, max_length=MAX_MOVE_CALLS, description="The move's LLM calls (v1 addition)."
    )


class FaultRecord(BaseModel):
    model_config = WIRE
    turn: int
    seat: int
    agent: str
    reason: FaultReason
    detail: str = ""
    latency_ms: float | None = None
    calls: list[LLMCall] | None = Field(
        default=None, max_length=MAX_MOVE_CALLS, description="The refused answer's LLM calls (v1 addition)."
    )


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
    """Caps on LLM use (None: no cap). `tokens` caps prompt plus completion tokens; `reasoning_tokens`
    the thinking tokens reported; `dollars` the cost by the agent's price table."""

    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    llm_calls: int | None = Field(default=None, ge=0)
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    tokens: int | None = Field(default=None, ge=0)
    reasoning_tokens: int | None = Field(default=None, ge=0)
    dollars: float | None = Field(default=None, ge=0)


class TurnBudget(BaseModel):
    """What a turn tells its seat of its LLM budget: this move's caps, and what is left of the
    match's caps before this move (None: no cap)."""

    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    per_move: BudgetLimits = Field(default_factory=BudgetLimits)
    left: BudgetLimits = Field(default_factory=BudgetLimits)


Turn.model_rebuild()  # `budget` names TurnBudget, defined after it


class Budget(BaseModel):
    """A seat's LLM budget, a time control next to the clock (referee/budget.py enforces it)."""

    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    per_move: BudgetLimits = Field(default_factory=BudgetLimits)
    per_match: BudgetLimits = Field(default_factory=BudgetLimits)
    label: str | None = Field(default=None, description="Budget class shown in standings; None: derived.")


class VoidedAttempt(BaseModel):
    """One play of a match voided because an LLM provider failed a seat's decision (v1 addition)."""

    model_config = WIRE
    agent: str
    turn: int
    cause: str = Field(max_length=MAX_CAUSE)
    moves: int = Field(default=0, ge=0, description="Steps played before the void.")
    ended_at: float = Field(default=0.0, ge=0)


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
    cost_usd: list[float] | None = Field(
        default=None,
        description="Dollars each seat's LLM calls cost in this match by its agent's price table "
        "(v1 addition); absent when no call of the match was priced.",
    )
    voided: list[VoidedAttempt] | None = Field(
        default=None,
        max_length=64,
        description="Earlier plays of this match voided by a provider fault (`[policy] provider = "
        '"void"`), each with its cause; absent when none was (v1 addition). Outcome `void`: every '
        "replay was voided too and the match is unplayed.",
    )


def seat_costs(record: MatchRecord) -> list[float] | None:
    """The match's cost per seat: the sum of its moves' priced calls, or None when none was priced."""
    costs = [0.0] * len(record.seats)
    priced = False
    for m in record.moves:
        if m.usage is not None and m.usage.cost_usd is not None and 0 <= m.player < len(costs):
            costs[m.player] += m.usage.cost_usd
            priced = True
    return [round(c, 6) for c in costs] if priced else None


def _without_thinking(calls: list[LLMCall] | None) -> list[LLMCall] | None:
    if calls is None:
        return None
    return [c.model_copy(update={"reasoning": None, "answer": None}) for c in calls]


def trim_record(record: MatchRecord, limit: int) -> MatchRecord:
    """A copy of `record` that serializes within `limit` bytes, dropping the least essential parts first."""
    thinking = record.model_copy(
        update={
            "moves": [m.model_copy(update={"calls": _without_thinking(m.calls)}) for m in record.moves],
            "faults": [f.model_copy(update={"calls": _without_thinking(f.calls)}) for f in record.faults],
            "trimmed": "the LLM calls' thinking and answer texts (the agents' call stores hold them)",
        }
    )
    if any(m.calls for m in record.moves) or any(f.calls for f in record.faults):
        if len(thinking.model_dump_json(exclude_none=True)) <= limit:
            return thinking
        record = thinking
    stages: list[tuple[str, dict[str, None]]] = [
        ("per-move policies, stats and notes", {"policy": None, "stats": None, "note": None}),
        (
            "per-move policies, stats, notes and usage",
            {"policy": None, "stats": None, "note": None, "usage": None},
        ),
        (
            "per-move policies, stats, notes, usage and LLM calls",
            {"policy": None, "stats": None, "note": None, "usage": None, "calls": None},
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

    @classmethod
    def ended_of(cls, record: MatchRecord, attempt: int = 1) -> MatchEvent:
        """The `ended` event that carries `record`."""
        return cls(
            type="ended",
            match_id=record.match_id,
            tournament=record.tournament,
            game=record.game,
            seats=record.seats,
            record=record,
            attempt=attempt,
        )


class FaultPolicy(BaseModel):
    model_config = ConfigDict(**{**WIRE, "extra": "forbid"})
    kind: Literal["forfeit", "retry", "random"] = "forfeit"
    retries: int = Field(default=2, ge=0, description="`retry`: extra attempts before forfeiting.")
    provider: Literal["void", "forfeit", "random"] = Field(
        default="void",
        description="A decision failed by the seat's LLM provider (fault `provider`): `void` the match "
        "and play it again with the same seed and secret, `forfeit` it, or play a `random` move.",
    )
    provider_retries: int = Field(
        default=6, ge=0, le=100, description="`void`: plays of a voided match before it is reported unplayed."
    )
    provider_wait_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description="`void`: seconds before the first replay; doubled after each void, at most 8 times.",
    )


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


class MoveVerdict(Message):
    """Analyst to spectators, on `spielbus.analysis.<match_id>`: one move judged while its match is
    played (`spielbus analyst`, docs/analysis.md). Perfect-information games only; advisory (the
    referee does not read it)."""

    type: Literal["move_verdict"] = "move_verdict"
    match_id: str
    turn: int = Field(description="the judged step's `turn`, as in the `moved` event")
    seat: int
    agent: str
    text: str
    cls: Literal["best", "good", "inaccuracy", "mistake", "blunder"] = Field(
        description="the move's class on Lichess's winning-chances thresholds (docs/analysis.md)"
    )
    wc_loss: float = Field(ge=0, description="the loss in winning chances ([-1, 1] scale)")
    accuracy: float = Field(ge=0, le=100, description="Lichess's move accuracy, percent")
    eval: float = Field(
        ge=-1, le=1, description="seat 0's winning chances after the move, by the reference ([-1, 1])"
    )
    best_text: str = Field(description="the reference's best move")
    reference: str = Field(description="the reference's name: `stockfish`, `exact`, `gnugo`, `mcts`...")
    exact: bool = Field(description="true only for a proven value")


MESSAGES: dict[str, type[BaseModel]] = {
    "turn": Turn,
    "compact_turn": CompactTurn,
    "move": Move,
    "match_started": MatchStarted,
    "match_ended": MatchEnded,
    "match_event": MatchEvent,
    "match_spec": MatchSpec,
    "match_record": MatchRecord,
    "move_verdict": MoveVerdict,
}

# A turn request as an agent that asked for compact turns reads it: either form, told apart by
# `type` (a referee that does not know the addition, or a game with hidden information, sends `turn`).
AnyTurn = Annotated[Turn | CompactTurn, Field(discriminator="type")]
ANY_TURN: TypeAdapter[Turn | CompactTurn] = TypeAdapter(AnyTurn)
