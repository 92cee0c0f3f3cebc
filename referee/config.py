"""The tournament file: TOML, validated strictly by pydantic (no coercion, finite floats: like the wire
protocol), errors that name the key and the line.

    name = "quickstart"
    openings = ["e4 e5 Nf3", "<FEN>"]   # chess only: each opening with both colour assignments
    format = "round_robin"        # round_robin | gauntlet | sprt (two agents, one game: see [sprt])
    games_per_pairing = 4         # per pairing and per seat order
    max_matches = 100000          # refuse larger schedules (the error says what they would cost)
    concurrency = 4
    deadline_ms = 5000
    seed = 1
    [policy]                      # forfeit (default) | retry (retries = N) | random
    kind = "forfeit"
    provider = "void"             # a decision the LLM provider failed: void (default) | forfeit | random
    provider_retries = 6          # void: plays of a voided match before it is reported unplayed
    provider_wait_s = 10.0        # void: wait before the first replay, doubled after each void
    [budget]                      # optional LLM budget, a fault `budget` when exceeded (referee/budget.py)
    per_move = { llm_calls = 8, tokens = 4000 }     # also prompt_tokens, completion_tokens,
                                                    # reasoning_tokens, dollars
    per_match = { tokens = 100000 }
    label = "8x4k"                # budget class in standings (default: the caps written out)
    [[games]]
    name = "tic_tac_toe"
    params = {}
    [agents.rand]
    kind = "random"
    [agents.mc]
    kind = "mcts"
    options = { simulations = 200 }

An agent with `external = true` is not started by `spielbus run`: it must already
be serving on the bus under its name. LLM endpoints are named sections

    [llm.local]
    backend = "openai"            # or "ollama"
    base_url = "http://127.0.0.1:8080/v1"
    model = "smollm2"
    max_in_flight = 4             # optional provider limits, shared by every agent naming this
    requests_per_minute = 60      # endpoint across processes (agents/llm/limits.py): `spielbus run`
    tokens_per_minute = 100000    # starts the limiter service on the bus

that an agent names with `llm = "local"` (they become its `llm` option). An LLM
agent whose endpoint has no `base_url` (and no OPENAI_BASE_URL / OLLAMA_HOST in
the environment) makes `spielbus run` start the embedded LLM server for it.

`format = "sprt"` plays the first agent against the second in colour-swapped game pairs until
the sequential probability ratio test decides (referee/sprt.py, docs/referee.md):

    [sprt]
    elo0 = 0                      # H0: Elo difference elo0; H1: elo1 (elo0 < elo1)
    elo1 = 10
    alpha = 0.05                  # error rates, each in (0, 1)
    beta = 0.05
    max_pairs = 500               # stop undecided after this many pairs

Games of more than two players seat a sample of the agents in a random order per
match (seeded).
"""

from __future__ import annotations

import math
import os
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from bus.toml_lines import line_of
from referee.sprt import SprtConfig
from referee.terms import FILE, Entrant, MatchTerms


class ConfigError(ValueError):
    """A bad tournament file; the message names the problem (and the line, where known)."""


class AgentConfig(Entrant):
    kind: str = Field(description="agent kind, e.g. random, mcts; see `spielbus agent --help`")
    options: dict[str, Any] = Field(default_factory=dict)
    external: bool = Field(default=False, description="already on the bus: do not start it")
    replicas: int = Field(default=1, ge=1, le=64)
    max_concurrency: int = Field(default=16, ge=1, le=1024)
    llm: str | None = Field(default=None, description="name of an [llm.NAME] section: its LLM endpoint")


# Elo K by name. `arena` (the default) moves a rating by up to 16 points a game, as chess rating
# lists do for established players, so a few dozen games separate agents; `llm_coaching` is the
# LLM Coaching paper's K = 0.2 (appendix B.2), under which a 16-0 match leaves both near 1500.
ELO_K_NAMES: dict[str, float] = {"arena": 16.0, "llm_coaching": 0.2}


class RatingsConfig(BaseModel):
    model_config = FILE
    elo_k: float = Field(
        default=ELO_K_NAMES["arena"],
        gt=0,
        le=1000,
        allow_inf_nan=False,
        description="Elo K: a number, or a name: "
        + ", ".join(f"{k} = {v:g}" for k, v in ELO_K_NAMES.items()),
    )
    elo_initial: float = Field(default=1500.0, ge=-1e6, le=1e6)
    stack: float = Field(
        default=100.0,
        gt=0,
        le=1e9,
        description="initial stack L for payoff games (the LLM Coaching paper eq. 19)",
    )
    bootstrap: int = Field(
        default=200,
        ge=10,
        le=100_000,
        description="accepted for old tournament files and unused: Bradley-Terry intervals are profile "
        "likelihood intervals now (docs/referee.md)",
    )
    invalid_adjustment: dict[str, Annotated[float, Field(ge=-1e6, le=1e6)]] = Field(
        default_factory=dict, description="per game: how much of a loss an invalid-action forfeit counts"
    )
    split_by: Literal["agent", "provenance"] = Field(
        default="agent",
        description="`provenance`: one row per (agent, provenance hash), so a changed prompt is a new row",
    )
    anchors: dict[str, float] = Field(
        default_factory=dict,
        description="agent -> rating (Elo points) held fixed: Bradley-Terry (and Elo, shifted) on that scale",
    )
    count_provider_faults: bool = Field(
        default=False,
        description="rate and score matches a `provider` fault touched (default: left out, counted apart)",
    )

    @field_validator("elo_k", mode="before")
    @classmethod
    def _named_k(cls, v: object) -> object:
        if isinstance(v, str):
            if v not in ELO_K_NAMES:
                raise ValueError(f"unknown Elo K name {v!r} (known: {', '.join(ELO_K_NAMES)}; or a number)")
            return ELO_K_NAMES[v]
        return v


class EmbeddedLLMConfig(BaseModel):
    """`[embedded_llm]`: which server `spielbus run` starts when an LLM agent names none
    (agents/llm/server.py; the names are checked here because the referee never imports agents)."""

    model_config = FILE
    server: Literal["llama-cpp-python", "llama-server"] = Field(
        default="llama-cpp-python",
        description="llama-cpp-python's server (one request at a time), or llama.cpp's llama-server "
        "(`make llama-server` builds it) decoding `parallel` requests together",
    )
    parallel: int = Field(default=1, ge=1, le=64, description="llama-server's slots")

    @model_validator(mode="after")
    def _slots(self) -> EmbeddedLLMConfig:
        if self.parallel > 1 and self.server != "llama-server":
            raise ValueError('parallel > 1 needs server = "llama-server"')
        return self


def _opening(text: str) -> str:
    """An opening entry checked, as its FEN or its UCI moves (games/chess/openings.py)."""
    from games.chess.openings import normalize_opening

    return normalize_opening(text)


class TournamentConfig(MatchTerms):
    """The tournament file: a match's terms (referee/terms.py) and how the schedule is drawn."""

    format: Literal["round_robin", "gauntlet", "sprt"] = "round_robin"
    champions: list[str] = Field(default_factory=list, description="gauntlet: the agents everyone else plays")
    agents: dict[str, AgentConfig] = Field(min_length=1)
    games_per_pairing: int = Field(default=2, ge=1, le=1_000_000_000)
    max_matches: int = Field(
        default=100_000,
        ge=1,
        le=100_000_000,
        description="refuse a schedule of more matches than this (raise it knowingly: every match's spec "
        "is queued on the bus and its record kept)",
    )
    both_seat_orders: bool = True
    concurrency: int = Field(default=4, ge=1, le=1024)
    allow_fallbacks: bool = Field(
        default=False,
        description="run/submit exit 0 even when more than `fallback_threshold` of an agent's moves "
        "were fallbacks (its LLM failed)",
    )
    fallback_threshold: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        allow_inf_nan=False,
        description="share of an agent's moves that may be fallbacks before the report warns (and, "
        "without `allow_fallbacks`, the run fails)",
    )
    seed: int = Field(default=0, ge=-(2**63), le=2**63 - 1)
    ratings: RatingsConfig = Field(default_factory=RatingsConfig)
    sprt: SprtConfig | None = Field(default=None, description="format sprt: the test's parameters")
    llm: dict[str, dict[str, Any]] = Field(default_factory=dict, description="named LLM endpoints")
    embedded_llm: EmbeddedLLMConfig = Field(
        default_factory=EmbeddedLLMConfig, description="the LLM server `spielbus run` starts when needed"
    )
    run_dir: str = Field(default="runs", min_length=1, max_length=4096)
    openings: list[Annotated[str, AfterValidator(_opening)]] = Field(
        default_factory=list,
        description="chess: start positions (FENs or move sequences from the start), each played "
        "with both colour assignments per pairing (games/chess/openings.py)",
    )

    @field_validator("run_dir")
    @classmethod
    def _run_dir(cls, v: str) -> str:
        # Refused at load (exit 2 naming the key), not when the run folder is made after start-up.
        return check_run_dir(v)

    @model_validator(mode="after")
    def _llm_refs(self) -> TournamentConfig:
        for name, agent in self.agents.items():
            if agent.llm is not None and agent.llm not in self.llm:
                raise ValueError(
                    f"agent {name!r} names llm {agent.llm!r}, but there is no [llm.{agent.llm}] section"
                )
        return self

    def agent_options(self, name: str) -> dict[str, Any]:
        """The options an agent process is started with: its own, plus its named LLM endpoint."""
        agent = self.agents[name]
        options = dict(agent.options)
        if agent.llm is not None:
            options["llm"] = {**self.llm[agent.llm], **options.get("llm", {})}
        return options

    @model_validator(mode="after")
    def _anchors(self) -> TournamentConfig:
        unknown = sorted(set(self.ratings.anchors) - set(self.agents))
        if unknown:
            raise ValueError(f"[ratings] anchors {unknown} are not among the agents {sorted(self.agents)}")
        return self

    @model_validator(mode="after")
    def _sprt(self) -> TournamentConfig:
        if self.format == "sprt":
            if len(self.agents) != 2:
                raise ValueError(f"format 'sprt' needs exactly two agents, got {len(self.agents)}")
            if len(self.games) != 1:
                raise ValueError(f"format 'sprt' needs exactly one game, got {len(self.games)}")
        elif self.sprt is not None:
            raise ValueError('an [sprt] table needs `format = "sprt"`')
        return self

    @property
    def sprt_config(self) -> SprtConfig:
        """The SPRT parameters (the defaults when the file has no [sprt] table)."""
        return self.sprt or SprtConfig()

    @model_validator(mode="after")
    def _gauntlet(self) -> TournamentConfig:
        if self.format == "gauntlet":
            if not self.champions:
                raise ValueError("format 'gauntlet' needs `champions = [...]`")
            unknown = [c for c in self.champions if c not in self.agents]
            if unknown:
                raise ValueError(f"champions {unknown} are not among the agents {sorted(self.agents)}")
        return self


def match_count(config: TournamentConfig, players: list[int]) -> int:
    """How many matches `config` schedules, given each game's number of players (no list built);
    for `sprt` the most it can schedule (it stops when the test decides)."""
    if config.format == "sprt":
        return 2 * config.sprt_config.max_pairs
    agents = len(config.agents)
    total = 0
    for n in players:
        if n == 2 and config.format == "gauntlet":
            champions = len(config.champions)
            groups = champions * (agents - champions) + math.comb(champions, 2)
        else:
            groups = math.comb(agents, n)
        orders = 2 if n == 2 and config.both_seat_orders else 1
        total += groups * orders * config.games_per_pairing
    return total


# Rough cost per match of a run: its spec on the work queue and its record kept by the run.
SPEC_BYTES = 600
RECORD_BYTES = 40_000


def check_schedule_size(config: TournamentConfig, players: list[int]) -> int:
    """The schedule's size, or a ConfigError when it exceeds `max_matches`, saying what it would cost."""
    n = match_count(config, players)
    if n > config.max_matches:
        raise ConfigError(
            f"the schedule has {n:,} matches (games_per_pairing = {config.games_per_pairing:,}), more than "
            f"max_matches = {config.max_matches:,}: about {n * SPEC_BYTES / 1e6:,.0f} MB of match specs "
            f"before the first match and {n * RECORD_BYTES / 1e9:,.1f} GB of records by the end. "
            "Lower games_per_pairing, or raise max_matches if you mean it."
        )
    return n


def check_run_dir(value: str) -> str:
    """A run folder path that can be made: no NUL, no part of it an existing file, and its nearest
    existing folder writable. ValueError saying which."""
    if "\0" in value:
        raise ValueError("a path without NUL characters")
    path = Path(value).expanduser()
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            break
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise ValueError(f"{value!r}: {probe} is a file, not a folder")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise ValueError(f"{value!r}: cannot write in {probe}")
    return value


_M = TypeVar("_M", bound=BaseModel)


def parse_toml(text: str, source: str, model: type[_M], what: str) -> _M:
    """TOML text validated strictly as `model`; a ConfigError naming each bad key and its line."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{source}: not valid TOML: {exc}") from exc
    try:
        # strict=True reaches the nested tables of other modules' models too ([sprt]).
        return model.model_validate(raw, strict=True)
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err.get("loc", ()))
            key = ".".join(str(p) for p in loc) or "(top level)"
            line = line_of(text, loc)
            where = f"{source}:{line}" if line else source
            msg = err.get("msg", "invalid")
            if err.get("type") == "extra_forbidden":
                msg = "unknown key"
            problems.append(f"{where}: {key}: {msg}")
        raise ConfigError(f"invalid {what}:\n  " + "\n  ".join(problems)) from exc


def parse_config(text: str, source: str = "<tournament>") -> TournamentConfig:
    return parse_toml(text, source, TournamentConfig, "tournament file")


def read_file(path: str | Path, what: str) -> str:
    """A tournament or ladder file's text; a ConfigError naming the file when it cannot be read."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {what} {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{p}: not UTF-8 text: {exc}") from exc


def load_config(path: str | Path) -> TournamentConfig:
    return parse_config(read_file(path, "tournament file"), str(Path(path)))
