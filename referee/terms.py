"""A match's terms, one definition for every file that schedules matches: the tournament file
(referee/config.py) and the ladder file (referee/ladder/config.py) both extend `MatchTerms`, and
both build their match specs with its `spec`.

The terms: the organiser's `name` (it prefixes every match id, so its length is capped for the
longest id either builds to stay a valid subject token), the `games`, the `agents` (their names
and LLM budgets), the turn's `deadline_ms`, `max_turns`, the fault `policy` and the default LLM
`budget`. A file's own defaults differ only where `term_defaults` says (the ladder's shorter
deadline); the bounds are the same for both.

Validation is strict like the wire protocol (bus.protocol.WIRE): `deadline_ms = "3"` is an error
naming the key, never a silent coercion; floats are finite (TOML has `inf` and `nan`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bus.protocol import Budget, FaultPolicy, GameSpec, MatchSpec
from bus.subjects import check_agent_name, check_token
from referee.budget import seat_budgets

FILE = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

# The longest suffix either organiser adds to its name to make a match id: a tournament's
# `-<date>-<time><ms>-<6 hex>-<5 digit index>` (referee/run_folder.py, referee/schedule.py), 32
# characters, more past 99,999 matches; a ladder's `-<16 hex>`, 17. Capping names at 64 leaves a
# tournament 32 more characters of index before an id reaches the subject token limit (128).
NAME_MAX = 64
AGENT_NAME_MAX = 64


class Entrant(BaseModel):
    """What every file says of an agent it seats: its LLM budget (the rest is the file's own)."""

    model_config = FILE
    budget: Budget | None = Field(default=None, description="this agent's LLM budget (replaces [budget])")


class MatchTerms(BaseModel):
    """The terms every match of a tournament or a ladder is played under."""

    model_config = FILE
    # A subclass's own defaults (the fields' bounds stay these).
    term_defaults: ClassVar[dict[str, Any]] = {}

    name: str = Field(default="tournament", description="prefixes every match id")
    games: list[GameSpec] = Field(min_length=1)
    agents: Mapping[str, Entrant] = Field(min_length=1)
    deadline_ms: int = Field(default=10_000, ge=10)
    max_turns: int = Field(default=2_000, ge=1)
    policy: FaultPolicy = Field(default_factory=FaultPolicy)
    budget: Budget | None = Field(
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
        return seat_budgets({n: a.budget for n, a in self.agents.items()}, self.budget, seats)

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
            policy=self.policy,
            max_turns=self.max_turns,
            secret=secrets.token_hex(16),
            budgets=self.seat_budgets(seats),
        )
