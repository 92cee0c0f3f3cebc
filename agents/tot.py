"""`tot`: Tree of Thoughts (ToT-DFS), the baseline of the Minimax-ToT paper.

Searches depth-first for a trajectory from the current state that ends in its
own win, generating and checking thoughts (actions) with the same LLM prompts
as `minimax_tot` (`agents.llm.proposers`) for both sides, and assuming nothing
about the opponent: any generated opponent move may appear in the plan (which
is exactly the weakness the Minimax-ToT paper points out). It plays the first action of the
first winning plan found; if none is found, the game's default action (Ghost:
challenge; Word chain: the empty answer, which the referee refuses as illegal,
as in the paper; other games: the LLM's first proposal).

Limits: perfect-information games only; `depth` plies at most; the default
action is never part of a plan for the opponent (a plan "the opponent gives up"
would be found at once); stops generating when the time budget runs out.
"""

from __future__ import annotations

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


class TotOptions(SearchOptions):
    depth: int = Field(default=4, ge=1, le=20, description="Plies of the DFS plan, at most.")


class TotStrategy(LLMStrategy):
    kind = "tot"
    Options = TotOptions

    def __init__(self, options: TotOptions, client: LLMClient | None = None) -> None:
        super().__init__(options, client)
        self.o: TotOptions = options

    async def think(self, turn: Turn, ctx: MatchContext, budget: Budget, meter: UsageMeter) -> Decision:
        state = rebuild(turn)
        root = state.current_player()
        proposer = make_proposer(turn.game.name, self.llm, settings_from(self.o))
        nodes = [0]  # per decision: decisions of several matches may run at once
        candidates = await proposer.propose(state, self.o.n, budget, meter)
        for a in candidates:
            if budget.spent(0.05):
                break
            if await self._plan(state.child(a), self.o.depth - 1, root, proposer, budget, meter, nodes):
                note = f"plan found: {state.action_to_string(a)}"
                return Decision(action=a, stats=MoveStats(nodes=nodes[0]), note=note)
        default = proposer.default_action(state)
        stats = MoveStats(nodes=nodes[0])
        if default is not None:
            return Decision(action=default, stats=stats, note="no winning plan: default action")
        if turn.game.name == "word_chain":
            return Decision(action_text="", stats=stats, note="no winning plan: empty answer")
        if candidates:
            return Decision(action=candidates[0], stats=stats, note="no winning plan: first proposal")
        raise LLMError("the LLM proposed no usable action")

    async def _plan(
        self,
        state: pyspiel.State,
        depth: int,
        root: int,
        proposer: Proposer,
        budget: Budget,
        meter: UsageMeter,
        nodes: list[int],
    ) -> bool:
        nodes[0] += 1
        while state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            state = state.child(self.rng.choices(outcomes, weights=probs)[0])
        if state.is_terminal():
            return state.returns()[root] > 0
        if depth <= 0 or budget.spent(0.05):
            return False
        actions = await proposer.propose(state, self.o.n, budget, meter)
        if state.current_player() != root:
            default = proposer.default_action(state)
            actions = [a for a in actions if a != default]
        for a in actions:
            if await self._plan(state.child(a), depth - 1, root, proposer, budget, meter, nodes):
                return True
        return False
