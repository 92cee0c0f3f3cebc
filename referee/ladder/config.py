"""The ladder file: TOML, validated strictly like the tournament file (referee/config.py), with the
same match terms (referee/terms.py: name, games, agents, deadline_ms, max_turns, policy, budget).

    name = "ladder"               # the ladder's id: its matches' tournament name and id prefix
    concurrency = 4               # matches in flight at once, the whole ladder
    rate_per_minute = 30          # matches started per minute at most (a token bucket)
    deadline_ms = 5000
    max_turns = 2000
    probe_s = 5                   # how often the pool is asked who is on the bus
    pending_timeout_s = 900       # a match without a record after this long is given up
    [policy]                      # the referee's fault policy, as in a tournament
    kind = "forfeit"
    [budget]                      # LLM budget of every seat unless its agent has its own
    per_move = { llm_calls = 8 }
    [quarantine]                  # bench an entry after `limit` faulted matches in a row
    limit = 3
    backoff_s = 300
    max_backoff_s = 3600
    [[games]]
    name = "tic_tac_toe"
    [agents.random]               # every name that may join; nothing is started by the ladder
    concurrency = 2               # this agent's matches at once (default 1)
    [agents.mcts]
    budget = { per_move = { llm_calls = 4 }, label = "4 calls" }

Agents are not started by the ladder: each joins by serving on the bus under its name (with that
name's login under accounts) and leaves by stopping. Each agent's budget class is shown on the
leaderboard, enforced by the referee per seat, and only entries of one class are paired.

Games may have any number of players (those of more than two are grouped and rated by openskill;
referee/ladder/service.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field

from referee.budget import budget_label
from referee.config import ConfigError, parse_toml
from referee.ladder.store import BUCKET
from referee.terms import FILE, Entrant, MatchTerms


class LadderAgent(Entrant):
    concurrency: int = Field(default=1, ge=1, le=64, description="this agent's ladder matches at once")


class QuarantineConfig(BaseModel):
    model_config = FILE
    limit: int = Field(default=3, ge=1)
    backoff_s: float = Field(default=300.0, gt=0)
    max_backoff_s: float = Field(default=3600.0, gt=0)


class LadderConfig(MatchTerms):
    """The ladder file: a match's terms (referee/terms.py) and how the ladder schedules."""

    term_defaults: ClassVar[dict[str, Any]] = {"name": "ladder", "deadline_ms": 5000}

    agents: dict[str, LadderAgent] = Field(min_length=2)
    concurrency: int = Field(default=4, ge=1, le=1024)
    rate_per_minute: float = Field(default=60.0, gt=0)
    probe_s: float = Field(default=5.0, gt=0, le=3600)
    pending_timeout_s: float = Field(default=900.0, gt=0)
    quarantine: QuarantineConfig = Field(default_factory=QuarantineConfig)
    bucket: str = BUCKET

    def new_match_id(self) -> str:
        """`<name>-<16 hex>`: unique without coordination between ladder processes."""
        return f"{self.name}-{uuid.uuid4().hex[:16]}"

    def budget_class(self, name: str) -> str:
        agent = self.agents.get(name)
        return budget_label(agent.budget if agent is not None and agent.budget is not None else self.budget)


def parse_ladder(text: str, source: str = "<ladder>") -> LadderConfig:
    return parse_toml(text, source, LadderConfig, "ladder file")


def load_ladder(path: str | Path) -> LadderConfig:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read ladder file {p}: {exc}") from exc
    return parse_ladder(text, str(p))
