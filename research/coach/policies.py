"""Behaviour policies for self-play: what `--policy AGENT_SPEC` names.

AGENT_SPEC is `KIND`, `KIND(key=value,...)` or `KIND:{JSON options}`:

- `random` (or `uniform`): uniform over the legal actions;
- `first`: always the first legal action;
- `cfvfp(iterations=1000)`: the average policy of our tabular CFVFP solved in-process
  (small games only);
- `policy_table(table=DIR_OR_FILE,source=reference)`: the `policy_table` agent kind's table;
  where the table has no entry, the kind's fallback: uniform here unless the options ask
  for the LLM (`fallback = "llm"`), which makes it an LLM policy;
- `llm_policy:{...}`: the `llm_policy` agent kind in `distribution` mode, through the LLM
  layer (its response cache and usage accounting).

Local policies (`distribution(state, player)`) are plain functions of the OpenSpiel
state and run in worker processes; LLM policies (`adistribution`) are async and run in
the collecting process, one request at a time, so identical requests hit the cache.

Limits: an LLM policy sees the seat's information state text and no separate history
(complete for games whose information state holds the public history: Kuhn, Leduc,
simplified Hold'em); a failed or unusable LLM answer counts as uniform play, counted.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from typing import Any

import pyspiel

from agents.base import MatchContext
from bus.protocol import GameSpec, Usage
from games.loader import GameSpecError, parse_spec
from referee.turns import TurnFrame, build_turn


class PolicySpecError(ValueError):
    pass


def parse_policy_spec(text: str) -> tuple[str, dict[str, Any]]:
    text = text.strip()
    kind, sep, rest = text.partition(":")
    if sep and rest.lstrip().startswith("{"):
        try:
            opts = json.loads(rest)
        except json.JSONDecodeError as exc:
            raise PolicySpecError(f"policy options of {kind!r} are not JSON: {exc}") from None
        if not isinstance(opts, dict):
            raise PolicySpecError(f"policy options of {kind!r} must be a JSON object")
        return kind.strip(), opts
    try:
        spec = parse_spec(text)
    except GameSpecError as exc:
        raise PolicySpecError(str(exc).replace("game spec", "policy spec")) from None
    return spec.name, dict(spec.params)


def uniform(k: int) -> list[float]:
    return [1.0 / k] * k


class LocalPolicy:
    """A policy computed in-process from the state alone."""

    is_llm = False

    def distribution(self, state: pyspiel.State, player: int) -> list[float]:
        raise NotImplementedError


class UniformPolicy(LocalPolicy):
    def distribution(self, state: pyspiel.State, player: int) -> list[float]:
        return uniform(len(state.legal_actions(player)))


class FirstPolicy(LocalPolicy):
    def distribution(self, state: pyspiel.State, player: int) -> list[float]:
        k = len(state.legal_actions(player))
        return [1.0] + [0.0] * (k - 1)


@dataclass
class TablePolicy(LocalPolicy):
    """Information state string -> {action id: p}; uniform where the table has no entry."""

    table: dict[str, dict[int, float]]
    hits: int = 0
    misses: int = 0

    def distribution(self, state: pyspiel.State, player: int) -> list[float]:
        legal = state.legal_actions(player)
        probs = self.table.get(state.information_state_string(player))
        if probs is None or set(probs) != set(legal):
            self.misses += 1
            return uniform(len(legal))
        self.hits += 1
        return [probs[a] for a in legal]


@dataclass
class LLMPolicyAdapter:
    """An agent strategy asked for a distribution at a state, as the referee would ask it."""

    strategy: Any  # an agents.base.Strategy whose decisions carry a `policy`
    spec: GameSpec
    deadline_ms: int = 120_000
    is_llm: bool = True
    usage: Usage = field(default_factory=Usage)
    fallbacks: int = 0
    decisions: int = 0

    async def adistribution(self, state: pyspiel.State, player: int, rng: random.Random) -> list[float]:
        n = state.get_game().num_players()
        turn = build_turn(
            TurnFrame("selfplay", self.spec, [f"p{i}" for i in range(n)], self.deadline_ms),
            state,
            player,
            len(state.history()),
            None,
        )
        decision = await self.strategy.decide(turn, MatchContext(match_id="selfplay"))
        self.decisions += 1
        self.usage = self.usage + decision.usage
        legal = state.legal_actions(player)
        if not decision.policy:
            self.fallbacks += 1
            return uniform(len(legal))
        probs = [float(decision.policy.get(str(a), 0.0)) for a in legal]
        total = sum(probs)
        if total <= 0:
            self.fallbacks += 1
            return uniform(len(legal))
        return [p / total for p in probs]

    async def aclose(self) -> None:
        await self.strategy.close()


def make_policy(spec_text: str, game: pyspiel.Game, game_spec: GameSpec) -> LocalPolicy | LLMPolicyAdapter:
    kind, opts = parse_policy_spec(spec_text)
    if kind in ("random", "uniform"):
        _no_options(kind, opts)
        return UniformPolicy()
    if kind == "first":
        _no_options(kind, opts)
        return FirstPolicy()
    if kind == "cfvfp":
        from research.coach.cfvfp import CFVFPSolver

        iterations = opts.pop("iterations", 1000)
        if opts or not isinstance(iterations, int) or iterations < 1:
            raise PolicySpecError("cfvfp takes one option, iterations (a positive integer)")
        solver = CFVFPSolver(game)
        solver.iterate(iterations)
        return TablePolicy(solver.average_policy())
    if kind == "policy_table":
        from agents.policy_table import PolicyTableStrategy

        strategy = _strategy(PolicyTableStrategy, opts)
        if strategy.opts.fallback_policy == "llm":
            return LLMPolicyAdapter(strategy, game_spec)
        return TablePolicy(strategy.table)
    if kind == "llm_policy":
        from agents.llm_policy import LLMPolicyStrategy

        opts = {**opts, "mode": "distribution"}
        return LLMPolicyAdapter(_strategy(LLMPolicyStrategy, opts), game_spec)
    raise PolicySpecError(
        f"unknown policy kind {kind!r}; known: random, uniform, first, cfvfp, policy_table, llm_policy"
    )


def _no_options(kind: str, opts: dict[str, Any]) -> None:
    if opts:
        raise PolicySpecError(f"{kind} takes no options, got {sorted(opts)}")


def _strategy(cls: Any, opts: dict[str, Any]) -> Any:
    from pydantic import ValidationError

    try:
        return cls.from_options(opts)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise PolicySpecError(f"bad options for {cls.kind}: {problems}") from None
    except (OSError, ValueError) as exc:
        raise PolicySpecError(f"bad options for {cls.kind}: {exc}") from None
