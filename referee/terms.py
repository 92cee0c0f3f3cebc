"""A match's terms, one definition for every file that schedules matches: the tournament file
(referee/config.py) and the ladder file (referee/ladder/config.py) both extend `MatchTerms`, and
both build their match specs with its `spec`.

The terms: the organiser's `name` (it prefixes every match id, so its length is capped for the
longest id either builds to stay a valid subject token), the `games`, the `agents` (their names
and LLM budgets), the turn's `deadline_ms`, `max_turns`, the fault `policy` and the default LLM
`budget`. A file's own defaults differ only where `term_defaults` says (the ladder's shorter
deadline); the bounds are the same for both.

Validation is strict like the wire protocol (bus.protocol.WIRE): `deadline_ms = "3"` is an error
naming the key, never a silent coercion; floats are finite (TOML has `inf` and `nan`). Every number
has an upper bound, checked at load (exit 2 naming the key and its line), from the table below
(`BOUNDS`, docs/referee.md "Bounds"): the wire models (`FaultPolicy`, `BudgetLimits`) accept any
count from a referee, a file is held to these.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bus.protocol import Budget, BudgetLimits, FaultPolicy, GameSpec, MatchSpec
from bus.subjects import check_agent_name, check_token
from referee.budget import seat_budgets

FILE = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

# The longest suffix either organiser adds to its name to make a match id: a tournament's
# `-<date>-<time><ms>-<6 hex>-<5 digit index>` (referee/run_folder.py, referee/schedule.py), 32
# characters, more past 99,999 matches; a ladder's `-<16 hex>`, 17. Capping names at 64 leaves a
# tournament 32 more characters of index before an id reaches the subject token limit (128).
NAME_MAX = 64
AGENT_NAME_MAX = 64

# The upper bounds of the match terms (docs/referee.md, "Bounds"): far past any sensible file, low
# enough that a typo (an extra three zeros) is an error, not a tournament that never ends.
DEADLINE_MS_MAX = 86_400_000  # a day per turn
MAX_TURNS_MAX = 1_000_000
RETRIES_MAX = 10
BUDGET_CALLS_MAX = 1_000_000
BUDGET_TOKENS_MAX = 10**10


class FileBudgetLimits(BudgetLimits):
    """`BudgetLimits` as a file may set them: bounded."""

    model_config = FILE
    llm_calls: int | None = Field(default=None, ge=0, le=BUDGET_CALLS_MAX)
    prompt_tokens: int | None = Field(default=None, ge=0, le=BUDGET_TOKENS_MAX)
    completion_tokens: int | None = Field(default=None, ge=0, le=BUDGET_TOKENS_MAX)
    tokens: int | None = Field(default=None, ge=0, le=BUDGET_TOKENS_MAX)


class FileBudget(Budget):
    """A file's `budget` tables, bounded (`referee/budget.py` enforces them as `Budget`)."""

    model_config = FILE
    per_move: FileBudgetLimits = Field(default_factory=FileBudgetLimits)
    per_match: FileBudgetLimits = Field(default_factory=FileBudgetLimits)

    def wire(self) -> Budget:
        return Budget.model_validate(self.model_dump())


class FilePolicy(FaultPolicy):
    """The fault policy as a file may set it: `retries` bounded."""

    model_config = FILE
    retries: int = Field(default=2, ge=0, le=RETRIES_MAX, description="`retry`: extra attempts")


class Entrant(BaseModel):
    """What every file says of an agent it seats: its LLM budget (the rest is the file's own)."""

    model_config = FILE
    budget: FileBudget | None = Field(default=None, description="this agent's LLM budget (replaces [budget])")


class MatchTerms(BaseModel):
    """The terms every match of a tournament or a ladder is played under."""

    model_config = FILE
    # A subclass's own defaults (the fields' bounds stay these).
    term_defaults: ClassVar[dict[str, Any]] = {}

    name: str = Field(default="tournament", description="prefixes every match id")
    games: list[GameSpec] = Field(min_length=1)
    agents: Mapping[str, Entrant] = Field(min_length=1)
    deadline_ms: int = Field(default=10_000, ge=10, le=DEADLINE_MS_MAX)
    max_turns: int = Field(default=2_000, ge=1, le=MAX_TURNS_MAX)
    policy: FilePolicy = Field(default_factory=FilePolicy)
    budget: FileBudget | None = Field(
        default=None,
        description="LLM calls/tokens per move and per match for every agent (referee/budget.py)",
    )

    @model_validator(mode="before")
    @classmethod
    def _own_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and cls.term_defaults:
            return {**cls.term_defaults, **data}
        return data

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        # Every match id built from it must stay a valid subject token.
        return check_token(v, "name", max_len=NAME_MAX)

    @field_validator("games", mode="before")
    @classmethod
    def _game_keys(cls, v: Any) -> Any:
        # GameSpec ignores unknown fields on the wire (forward compatibility); a file must not.
        if isinstance(v, list):
            for i, g in enumerate(v):
                extra = sorted(set(g) - set(GameSpec.model_fields)) if isinstance(g, dict) else []
                if extra:
                    raise ValueError(f"games[{i}]: unknown key {extra[0]!r}")
        return v

    @field_validator("agents")
    @classmethod
    def _agent_names(cls, v: Mapping[str, Entrant]) -> Mapping[str, Entrant]:
        for name in v:
            check_agent_name(name, max_len=AGENT_NAME_MAX)
        return v

    def seat_budgets(self, seats: list[str]) -> dict[str, Budget]:
        """Each seat's LLM budget: its agent's own, else the file's `[budget]` (none: unlimited)."""
        own = {n: a.budget.wire() if a.budget is not None else None for n, a in self.agents.items()}
        return seat_budgets(own, self.budget.wire() if self.budget is not None else None, seats)

    def wire_policy(self) -> FaultPolicy:
        """The fault policy as a match spec carries it."""
        return FaultPolicy.model_validate(self.policy.model_dump())

    def spec(self, match_id: str, tournament: str, game: GameSpec, seats: list[str], seed: int) -> MatchSpec:
        """One match under these terms, with its own chance secret (drawn with `secrets`, never from
        the seed: anyone who knows the file could otherwise predict every hidden card)."""
        return MatchSpec(
            match_id=match_id,
            tournament=tournament,
            game=game,
            seats=seats,
            seed=seed,
            deadline_ms=self.deadline_ms,
            policy=self.wire_policy(),
            max_turns=self.max_turns,
            secret=secrets.token_hex(16),
            budgets=self.seat_budgets(seats),
        )
