"""`minimax_tot`: Minimax Tree of Thoughts (the Minimax-ToT paper), on the true game rebuilt from the turn.

Per decision: generate up to `n` actions with the LLM (prompts of appendix B for
Ghost and Word chain, "choose among these legal moves" otherwise; see
`agents.llm.proposers`), filter (illegal, duplicate, the LLM validity check) and
sort them; alpha-beta (the paper's strict `β < α` cut, so equal values are real
ties) to depth `depth` (D=3); a frontier state is valued by the mean of
`rollouts` (3) LLM rollouts, one sampled action per step; the best action wins,
ties broken at random. Every LLM answer goes through the agent's response cache
(section 3.3): the tree of the next decision overlaps this one, so many of its
requests are hits.

Limits: perfect-information games only (`turn.state`); values are the root
player's return; chance nodes are sampled, not averaged; a rollout that reaches
`rollout_max_steps` without ending counts 0; when the time budget runs out the
unsearched branches are left out (no LLM calls are started past the deadline);
a rollout step where the LLM proposes nothing plays the game's default action
(Ghost: challenge) or, in Word chain, loses for the player who could not answer
(the rule "whoever fails to respond loses").
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pyspiel
from pydantic import Field

from agents.base import Decision, MatchContext
from agents.llm import LLMClient
from agents.llm.base import LLMError
from agents.llm.proposers import Proposer, make_proposer
from agents.llm.strategy import Budget, LLMStrategy
from agents.llm.usage import UsageMeter
from agents.search import SearchOptions, rebuild, settings_from
from bus.protocol import MoveStats, Turn


class MinimaxTotOptions(SearchOptions):
    depth: int = Field(
        default=3, ge=1, le=20, description="D: plies searched before rollouts (Minimax-ToT paper: 3)."
    )
    rollouts: int = Field(
        default=3, ge=0, le=100, description="Rollouts per frontier state (Minimax-ToT paper: 3)."
    )
    rollout_max_steps: int = Field(default=12, ge=1, le=1000)


@dataclass
class SearchStats:
    nodes: int = 0
    rollouts: int = 0
    max_depth: int = 0


class MinimaxTotStrategy(LLMStrategy):
    kind = "minimax_tot"
    Options = MinimaxTotOptions

    def __init__(self, options: MinimaxTotOptions, client: LLMClient | None = None) -> None:
        super().__init__(options, client)
        self.o: MinimaxTotOptions = options

    async def think(self, turn: Turn, ctx: MatchContext, budget: Budget, meter: UsageMeter) -> Decision:
        state = rebuild(turn)
        proposer = make_proposer(turn.game.name, self.llm, settings_from(self.o))
        search = _Search(self, proposer, budget, meter, root=state.current_player())
        candidates = await proposer.propose(state, self.o.n, budget, meter)
        if not candidates:
            default = proposer.default_action(state)
            if default is None:
                raise LLMError("the LLM proposed no usable action")
            return Decision(action=default, note="no proposal: default action")
        values: dict[int, float] = {}
        alpha = -math.inf
        for a in candidates:
            if budget.spent(0.05):
                break
            child = state.child(a)
            v = await search.value(child, self.o.depth - 1, alpha, math.inf, 1)
            values[a] = v
            alpha = max(alpha, v)
        if not values:
            return Decision(action=candidates[0], note="out of time: first proposal")
        best = max(values.values())
        action = self.rng.choice([a for a, v in values.items() if v == best])
        stats = MoveStats(
            nodes=search.stats.nodes, depth=search.stats.max_depth, rollouts=search.stats.rollouts
        )
        note = "values " + ", ".join(f"{state.action_to_string(a)}={v:+.2f}" for a, v in values.items())
        return Decision(action=action, stats=stats, note=note[:300])


class _Search:
    def __init__(
        self, strat: MinimaxTotStrategy, proposer: Proposer, budget: Budget, meter: UsageMeter, root: int
    ) -> None:
        self.o = strat.o
        self.rng = strat.rng
        self.proposer = proposer
        self.budget = budget
        self.meter = meter
        self.root = root
        self.stats = SearchStats()

    def _resolve_chance(self, state: pyspiel.State) -> pyspiel.State:
        while state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            state = state.child(self.rng.choices(outcomes, weights=probs)[0])
        return state

    async def value(self, state: pyspiel.State, depth: int, alpha: float, beta: float, ply: int) -> float:
        self.stats.nodes += 1
        self.stats.max_depth = max(self.stats.max_depth, ply)
        state = self._resolve_chance(state)
        if state.is_terminal():
            return float(state.returns()[self.root])
        if self.budget.spent(0.05):
            return 0.0
        if depth <= 0:
            return await self.rollout_value(state)
        actions = await self.proposer.propose(state, self.o.n, self.budget, self.meter)
        if not actions:
            # Out of time is not "nothing to say": value unknown.
            return 0.0 if self.budget.spent(0.05) else self._no_answer_value(state)
        maximizing = state.current_player() == self.root
        best = -math.inf if maximizing else math.inf
        for a in actions:
            v = await self.value(state.child(a), depth - 1, alpha, beta, ply + 1)
            if maximizing:
                best = max(best, v)
                alpha = max(alpha, v)
            else:
                best = min(best, v)
                beta = min(beta, v)
            if beta < alpha:
                break
        return best

    def _no_answer_value(self, state: pyspiel.State) -> float:
        default = self.proposer.default_action(state)
        if default is not None:
            child = state.child(default)
            return float(child.returns()[self.root]) if child.is_terminal() else 0.0
        # Nothing to say: the player to move fails to respond and loses.
        return -1.0 if state.current_player() == self.root else 1.0

    async def rollout_value(self, state: pyspiel.State) -> float:
        if self.o.rollouts == 0:
            return 0.0
        total = 0.0
        done = 0
        for k in range(self.o.rollouts):
            if self.budget.spent(0.05):
                break
            total += await self._rollout(state, k)
            done += 1
        return total / done if done else 0.0

    async def _rollout(self, state: pyspiel.State, k: int) -> float:
        self.stats.rollouts += 1
        s = state
        for _ in range(self.o.rollout_max_steps):
            s = self._resolve_chance(s)
            if s.is_terminal() or self.budget.spent(0.05):
                break
            a = await self.proposer.sample_one(s, self.budget, self.meter, salt=k + 1)
            if a is None:
                if self.budget.spent(0.05):
                    break
                default = self.proposer.default_action(s)
                if default is None:
                    return -1.0 if s.current_player() == self.root else 1.0
                a = default
            s = s.child(a)
        return float(s.returns()[self.root]) if s.is_terminal() else 0.0
