"""The strategy interface: a new agent kind is one module with one `Strategy` subclass.

The runtime (`agents.runtime`) owns the bus: it validates each `turn`, keeps
per-match state, calls `decide`, and turns the `Decision` into a `move`.
A strategy never touches NATS.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import hashlib
import json
import os
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from bus.protocol import CompactTurn, MatchEnded, MatchStarted, MoveStats, Turn, TurnBudget, Usage

R = TypeVar("R")


class StrategyOptions(BaseModel):
    """Options common to every strategy; subclasses add their own fields (all with defaults)."""

    model_config = ConfigDict(extra="forbid")
    seed: int | None = Field(default=None, ge=-(2**63), le=2**63 - 1)


@dataclass
class Decision:
    """What a strategy answers: an action id, or a text for the referee to match."""

    action: int | None = None
    action_text: str | None = None
    policy: dict[str, float] | None = None
    usage: Usage = field(default_factory=Usage)
    stats: MoveStats | None = None
    note: str | None = None
    # The LLM calls behind the decision, one summary each (agents/llm fills them: call-store id,
    # outcome class, tokens, thinking); the runtime sends them in the move for the record.
    calls: list[dict[str, Any]] | None = None


@dataclass(frozen=True)
class DecisionLimit:
    """A decision's whole budget in one value (as python-chess's `Limit` is a move's): the turn's
    clock `clock_s` and `end`, the `time.monotonic()` instant by which `decide` must return (the
    runtime's deadline; None outside the runtime), and `llm`, the seat's LLM budget for this move
    and what is left of the match's (None: the referee sent none). A strategy takes its time from here,
    never from the turn's `deadline_ms`: `share(f)` is its own fraction of the clock, `remaining()`
    what is left before `end`."""

    clock_s: float
    end: float | None = None
    llm: TurnBudget | None = None

    def share(self, fraction: float) -> float:
        """`fraction` of the turn's clock, in seconds (a strategy's own thinking share)."""
        return self.clock_s * fraction

    def remaining(self) -> float:
        """Seconds left before `end`, or the whole clock without one."""
        return self.clock_s if self.end is None else self.end - time.monotonic()


@dataclass
class MatchContext:
    """Per-match state kept by the runtime, keyed by match id, dropped on `match_ended`.

    `data` is the match's state, shared by all its turns. `deadline` is per turn: the
    `time.monotonic()` instant by which `decide` must have returned (the runtime counts it
    from the turn's arrival or the referee's send time, less a reserve for the reply);
    None outside the runtime (tests, benchmarks calling `decide` directly).
    """

    match_id: str
    data: dict[str, Any] = field(default_factory=dict)
    deadline: float | None = None

    def limit(self, turn: Turn | CompactTurn) -> DecisionLimit:
        """The limit of the decision on `turn`: its clock, the runtime's `deadline` for it, and the
        seat's LLM budget the turn carries."""
        return DecisionLimit(turn.deadline_ms / 1000, self.deadline, turn.budget)

    def remaining(self, turn: Turn | CompactTurn) -> float:
        """Seconds left to think on `turn`: until `deadline`, or the whole clock without one."""
        return self.limit(turn).remaining()


class TurnExpired(RuntimeError):
    """The turn's time ran out before the work could start (the runtime refuses the turn)."""


class ProviderFailure(RuntimeError):
    """The decision failed for the LLM provider's reasons (outage, rate limit, hang, a 200 that is
    not a completion), not the model's: the runtime answers with the failure instead of a move, and
    the referee's `provider` policy decides (a provider's outage is never scored as the model's play).

    `calls`: the ids, in the LLM call store, of the failed calls behind it.
    """

    def __init__(self, cause: str, calls: list[str] | None = None) -> None:
        super().__init__(cause)
        self.cause = cause
        self.calls = list(calls or [])


_cpu_pool: concurrent.futures.ThreadPoolExecutor | None = None


def cpu_executor() -> concurrent.futures.ThreadPoolExecutor:
    """The process's executor for CPU-bound strategy work, one worker per core: more would only
    slice the same cores thinner and make every queued turn late."""
    global _cpu_pool
    if _cpu_pool is None:
        _cpu_pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=max(1, os.cpu_count() or 1), thread_name_prefix="strategy-cpu"
        )
    return _cpu_pool


async def run_cpu(deadline: float | None, fn: Callable[..., R], *args: Any) -> R:
    """Run `fn(*args)` on `cpu_executor()`. Work whose `deadline` (`time.monotonic()`) has passed by
    the time a worker is free is not started: `TurnExpired` instead."""

    def guarded() -> R:
        if deadline is not None and time.monotonic() >= deadline:
            raise TurnExpired("the turn's time ran out while it waited for a CPU")
        return fn(*args)

    return await asyncio.get_running_loop().run_in_executor(cpu_executor(), guarded)


def decision_rng(seed: int | None, turn: Turn) -> random.Random:
    """The RNG for one decision: with a seed, a function of the seed, the turn's `match_seed` and
    what the seat knows (game, seats, turn number, observation, history, retry).

    The same in a rerun of a tournament however many matches the agent serves at once; different
    between two matches of one tournament, because the referee sends each match its own
    `match_seed` (from the tournament seed and the match's place in the schedule). Without it
    (an older referee, a turn built by hand) two seeded deterministic agents meeting in the same
    seats would play the same game every time. The match id is left out on purpose: it holds the
    tournament's start time, so a rerun would differ."""
    if seed is None:
        return random.Random()
    view = turn.model_dump_json(include={"game", "seat", "seats", "turn", "observation", "history", "retry"})
    # Without a match seed the key is the one used before it existed, so old numbers still hold.
    key = f"{seed}:{view}" if turn.match_seed is None else f"{seed}:{turn.match_seed}:{view}"
    digest = hashlib.sha256(key.encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class Strategy(abc.ABC):
    """Subclass, set `kind`, `Options`, and implement `decide`."""

    kind: ClassVar[str]
    version: ClassVar[str] = "1"
    Options: ClassVar[type[StrategyOptions]] = StrategyOptions
    # Games this strategy accepts (names); empty means any game.
    games: tuple[str, ...] = ()
    # Whether `decide` reads `turn.rules`: the runtime then fills it in when the referee did not
    # send it (it sends it on a seat's first turn only, to one replica).
    wants_rules: ClassVar[bool] = False
    # True: the strategy reads only `state` and the legal ids (an engine). The agent then asks for
    # compact turns in its discovery metadata (`"turns": "compact"`, docs/protocol.md), and turns of
    # perfect-information games come as `compact_turn`, decided by `decide_compact`.
    compact_turns: ClassVar[bool] = False

    def __init__(self, options: StrategyOptions) -> None:
        self.options = options

    @classmethod
    def from_options(cls, raw: dict[str, Any]) -> Strategy:
        return cls(cls.Options.model_validate(raw))

    @abc.abstractmethod
    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        """Choose an action for `turn`. Must return before `ctx.deadline` (see `MatchContext`)."""

    async def decide_compact(self, turn: CompactTurn, ctx: MatchContext) -> Decision:
        """Choose an action for a compact turn (strategies with `compact_turns` only)."""
        raise NotImplementedError(f"{self.kind} does not read compact turns")

    async def start(self, name: str) -> None:  # noqa: B027
        """Optional hook: called once by the runtime, in its event loop, before the agent `name`
        joins the bus (e.g. the `human` kind starts its seat page here)."""

    async def match_started(self, msg: MatchStarted, ctx: MatchContext) -> None:  # noqa: B027
        """Optional hook: set up per-match state."""

    async def match_ended(self, msg: MatchEnded, ctx: MatchContext) -> None:  # noqa: B027
        """Optional hook: per-match state is dropped after this returns."""

    def models(self) -> list[str]:
        """LLM model names this strategy uses (for provenance)."""
        return []

    def options_hash(self) -> str:
        """12 hex digits of the SHA-256 of the options, for provenance: a changed prompt or setting
        changes it; the LLM's credentials and address do not (an embedded server's port changes
        every run; referee/provenance.py)."""
        data = self.options.model_dump(mode="json")
        if isinstance(data.get("llm"), dict):
            data["llm"] = {k: v for k, v in data["llm"].items() if k not in ("api_key", "base_url")}
        return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()[:12]

    async def close(self) -> None:  # noqa: B027
        """Release resources (LLM clients, processes) on shutdown."""
