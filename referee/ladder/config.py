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
    [quarantine]                  # bench an account after `limit` faulted matches in a row
    limit = 3
    backoff_s = 300
    max_backoff_s = 3600
    [pace]                        # per pair of accounts and game (0: no cap)
    per_pairing_per_hour = 60     # matches scheduled in any hour
    per_pairing = 0               # matches in all
    per_account_per_minute = 0    # matches an account starts per minute
    [limits]                      # what bots cannot grow (referee/ladder/bounds.py)
    entries_per_account = 4       # an account's most recent entries on the page and in metrics
    idle_s = 86400                # an entry not seen this long leaves the page and metrics
    rows = 200                    # leaderboard rows on the page at most
    log_interval_s = 60           # one summary log line per interval, not one per match
    [audit]                       # collusion report (referee/ladder/audit.py)
    alpha = 0.01                  # flag pairings under alpha / pairings tested (Bonferroni)
    min_games = 10                # mutual games before a pairing is tested
    min_forfeits = 3              # faulted matches, all against one opponent, to be listed
    [[games]]
    name = "tic_tac_toe"
    [agents.random]               # every name that may join; nothing is started by the ladder
    concurrency = 2               # this agent's matches at once (default 1)
    [agents.mcts]
    budget = { per_move = { llm_calls = 4 }, label = "4 calls" }
    [registration]                # optional: bots register themselves (`spielbus ladder registrar`)
    policy = "invite"             # "open", "invite" (one code per bot) or "approval" (the operator's)
    invites = ["c0ffee-1", "c0ffee-2"]
    max_bots = 1000
    limits = { conn = 4, subs = 64, payload = 1048576, data = -1 }   # every registered bot's account

Agents are not started by the ladder: each joins by serving on the bus under its name (with that
name's login under accounts) and leaves by stopping. Quarantine, rate limits and pace follow the
account (the login a bot's messages come from), not the `name@hash` entry: a bot that changes
its options keeps its bench and its pace. Each agent's budget class is shown on the
leaderboard, enforced by the referee per seat, and only entries of one class are paired.

Games may have any number of players (those of more than two are grouped and rated by openskill;
referee/ladder/service.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator

from bus.registry import RegistrationPolicy
from bus.subjects import check_stream_name
from referee.budget import budget_label
from referee.config import parse_toml, read_file
from referee.ladder.store import BUCKET
from referee.terms import FILE, Entrant, MatchTerms


class LadderAgent(Entrant):
    concurrency: int = Field(default=1, ge=1, le=64, description="this agent's ladder matches at once")


WEEK_S = 7 * 86_400.0


class QuarantineConfig(BaseModel):
    model_config = FILE
    limit: int = Field(default=3, ge=1, le=1000)
    backoff_s: float = Field(default=300.0, ge=1, le=WEEK_S)
    max_backoff_s: float = Field(default=3600.0, ge=1, le=4 * WEEK_S)

    @model_validator(mode="after")
    def _ordered(self) -> QuarantineConfig:
        if self.max_backoff_s < self.backoff_s:
            raise ValueError(
                f"quarantine.max_backoff_s ({self.max_backoff_s:g}) must be at least "
                f"quarantine.backoff_s ({self.backoff_s:g})"
            )
        return self


class PaceConfig(BaseModel):
    """How often a pairing (two accounts, one game) and an account may play; 0 for no cap."""

    model_config = FILE
    per_pairing_per_hour: int = Field(default=60, ge=0, le=1_000_000)
    per_pairing: int = Field(default=0, ge=0, le=1_000_000_000)
    per_account_per_minute: float = Field(default=0.0, ge=0.0, le=60_000)


class LimitsConfig(BaseModel):
    """What the operator bounds so that bots cannot grow it: shown entries, series, rows."""

    model_config = FILE
    entries_per_account: int = Field(default=4, ge=1, le=1000)
    idle_s: float = Field(default=86_400.0, ge=1, le=4 * WEEK_S)
    rows: int = Field(default=200, ge=1, le=100_000)
    log_interval_s: float = Field(default=60.0, ge=0.1, le=86_400)


class AuditConfig(BaseModel):
    """The collusion report's thresholds (referee/ladder/audit.py)."""

    model_config = FILE
    alpha: float = Field(default=0.01, gt=0, lt=1)
    min_games: int = Field(default=10, ge=1, le=100_000)
    min_forfeits: int = Field(default=3, ge=1, le=100_000)


class LadderConfig(MatchTerms):
    """The ladder file: a match's terms (referee/terms.py) and how the ladder schedules."""

    term_defaults: ClassVar[dict[str, Any]] = {"name": "ladder", "deadline_ms": 5000}

    agents: dict[str, LadderAgent] = Field(default={})
    registration: RegistrationPolicy | None = Field(
        default=None, description="bots may register themselves (`spielbus ladder registrar`, docs/ladder.md)"
    )
    concurrency: int = Field(default=4, ge=1, le=1024)
    rate_per_minute: float = Field(default=60.0, ge=0.01, le=60_000)
    probe_s: float = Field(default=5.0, ge=0.1, le=3600)
    pending_timeout_s: float = Field(default=900.0, ge=1, le=WEEK_S)
    quarantine: QuarantineConfig = Field(default_factory=QuarantineConfig)
    pace: PaceConfig = Field(default_factory=PaceConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    bucket: str = Field(default=BUCKET, description="the NATS key-value bucket of results and state")

    @field_validator("bucket")
    @classmethod
    def _bucket(cls, v: str) -> str:
        # A bad name passed parsing and failed at run time with a traceback (issue 40).
        return check_stream_name(v, "bucket", kv=True)

    @model_validator(mode="after")
    def _enough_agents(self) -> LadderConfig:
        # Registered bots join at run time: a ladder with [registration] may list none.
        if self.registration is None and len(self.agents) < 2:
            raise ValueError(
                "agents: at least 2 agents (or a [registration] table: bots register themselves)"
            )
        return self

    def new_match_id(self) -> str:
        """`<name>-<16 hex>`: unique without coordination between ladder processes."""
        return f"{self.name}-{uuid.uuid4().hex[:16]}"

    def budget_class(self, name: str) -> str:
        agent = self.agents.get(name)
        return budget_label(agent.budget if agent is not None and agent.budget is not None else self.budget)


def parse_ladder(text: str, source: str = "<ladder>") -> LadderConfig:
    return parse_toml(text, source, LadderConfig, "ladder file")


def load_ladder(path: str | Path) -> LadderConfig:
    return parse_ladder(read_file(path, "ladder file"), str(Path(path)))
