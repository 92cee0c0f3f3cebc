"""`llm_mcts`: MCTS on the true game with the LLM as action pruner and critic (the LLM-MCTS paper).

Each new tree node asks the LLM for the best move `k` times (20 samples at
temperature 0.7, the LLM-MCTS paper section 6) and keeps the distinct legal answers: the
pruned action set. Selection maximises the mean value plus the polynomial UCB
bonus of the LLM-MCTS paper eq. (4.1) after Shah et al. (2020),
`beta * N(s)**(alpha/xi) / n(s,a)**(1-eta)` (beta standing for B**(1/xi)), with unvisited actions
first; the min player's values enter negated (zero-sum, two players). Every
simulation runs down to the depth limit (or the end of the game), where the
value comes from the critic:

- `rule`: chess material in centipawns (the LLM-MCTS paper table 4: pawn 100, knight and
  bishop 325, rook 500, queen 900), own minus opponent's, divided by 1000; a
  finished game scores 10 for the winner, 0 for a draw. Other games: 0.
- `llm`: the LLM scores the position in centipawns from -1000 to 1000 (a JSON
  integer when `constrain` is on), divided by 1000.
- `both`: their sum, as in the paper's full-game experiment.

Terminal states score their returns (scaled by 10 for chess, as above). The
move is the most visited root action.

Concurrency: `parallel` simulations run at once (asyncio tasks), so the LLM calls of a
batch of leaves (pruner and critic) are in flight together. A simulation counts its
visit on the way down with a virtual loss (`virtual_loss`, in value units, against the
mover), replaced by the real value when it backs up, so the others of its batch spread
over other actions; a node being pruned is awaited by every simulation that reaches it
(one pruner call per node). The pruner lists the legal moves in an order shuffled per node
(`shuffle_legal`, on by default: the small model answers the first listed move).
`parallel = 1` is the plain sequential search; above 1 the
tree depends on the order in which LLM replies arrive.

Why not OpenSpiel's `open_spiel/python/algorithms/async_mcts.py` (it is in the installed
wheel, and its selection function could express the polynomial bonus):
- its search is AlphaZero-shaped: each simulation expands one new node and takes the
  value at that node (`Evaluator.prior_and_value`); the paper's Algorithm 1 descends to
  the fixed depth D every simulation, pruning at each new node on the way, and asks the
  critic only at depth D (or the end of the game);
- `Evaluator` is synchronous and runs on a thread pool while `MCTSBot.step` blocks its
  thread; the LLM client is asyncio on the agent's loop;
- it knows no deadline: a search is `max_simulations` and a per-batch `timeout` whose late
  evaluations are dropped; the referee's clock needs the search to stop in time, and a
  late leaf to keep its rule-based value;
- its virtual loss is `virtual_loss * game.min_utility()` (-1 in chess), while the critic's
  values here reach 10 (a chess win), and its final move breaks ties by total reward,
  not at random as the paper's baseline does.
So the search is ours; it borrows async_mcts's idea (virtual loss, a batch of leaves
evaluated together). Its parts are the agents' search core's (`agents.tree_search`): the pruner
and the critic are one `AsyncEvaluator` (`PrunerCritic`: the prior and the value of OpenSpiel's
`Evaluator`), the nodes are `Node`s and the selection is `polynomial_select`.

Limits: two-player zero-sum perfect-information games (`turn.state`); chance
nodes are sampled; the paper's exact constants for N, the depth and the UCB
exponents are not in the seed text we have, so the defaults are ours and
documented here (50 simulations, depth 4, alpha/xi = 1/4, eta = 1/2, beta =
1); when the LLM proposes no legal move the node keeps every legal action; a
simulation started is finished without LLM calls once the time budget is spent.
"""

from __future__ import annotations

import asyncio
import random
import re
from typing import Literal

import pyspiel
from pydantic import Field

from agents.base import Decision, MatchContext
from agents.llm import LLMClient
from agents.llm.base import LLMError
from agents.llm.prompts import ANSWER_FORMAT, shown_order
from agents.llm.strategy import Budget, LLMStrategy, LLMStrategyOptions
from agents.llm.usage import UsageMeter
from agents.search import rebuild
from agents.tree_search import AsyncEvaluator, Node, polynomial_select
from bus.protocol import MoveStats, Turn

PIECE_CENTIPAWNS = {"p": 100, "n": 325, "b": 325, "r": 500, "q": 900}


def pruner_prompt(state: pyspiel.State, texts: list[str]) -> str:
    """The pruner's question: the answer's form with a placeholder, never a legal move as an
    example (a small model copies an example move as its answer)."""
    return (
        f"Game: {state.get_game().get_type().long_name}. You are player {state.current_player()}.\n"
        f"State:\n{state}\n\nLegal moves: {', '.join(texts)}.\n"
        f"What is the best move? {ANSWER_FORMAT}"
    )


class LlmMctsOptions(LLMStrategyOptions):
    simulations: int = Field(default=50, ge=1)
    depth: int = Field(default=4, ge=1, description="Plies per simulation before the critic.")
    k: int = Field(default=20, ge=1, description="LLM samples per new node (the LLM-MCTS paper: 20).")
    temperature: float = Field(
        default=0.7, ge=0.0, description="Pruner sampling temperature (the LLM-MCTS paper: 0.7)."
    )
    constrain: bool = True
    critic: Literal["llm", "rule", "both"] = "both"
    critic_temperature: float = Field(default=0.0, ge=0.0, description="LLM-MCTS paper: gpt-4 at T=0.")
    beta: float = Field(default=1.0, gt=0.0, description="Bonus scale (B**(1/xi) of eq. 4.1).")
    alpha_over_xi: float = Field(default=0.25, ge=0.0)
    eta: float = Field(default=0.5, ge=0.0, lt=1.0)
    max_tokens: int = Field(default=24, ge=4)
    parallel: int = Field(
        default=4, ge=1, le=64, description="Simulations at once: their LLM calls are in flight together."
    )
    virtual_loss: float = Field(
        default=1.0, ge=0.0, description="Value charged to a visit in flight, against the mover."
    )
    shuffle_legal: bool = Field(
        default=True,
        description="List the pruner's legal moves in an order shuffled per node (the same in a rerun, "
        "different between matches), not OpenSpiel's (the small model answers the first listed move).",
    )


def chess_material(state: pyspiel.State, player: int) -> float:
    """The LLM-MCTS paper's rule-based critic for `player` (0 = black, 1 = white in OpenSpiel chess)."""
    if state.is_terminal():
        r = state.returns()[player]
        return 10.0 if r > 0 else (-10.0 if r < 0 else 0.0)
    board = str(state).split()[0]
    white = sum(PIECE_CENTIPAWNS.get(c.lower(), 0) for c in board if c.isupper())
    black = sum(PIECE_CENTIPAWNS.get(c, 0) for c in board if c.islower())
    own, other = (white, black) if player == 1 else (black, white)
    return (own - other) / 1000


class PrunerCritic:
    """The LLM as the search's evaluator (`agents.tree_search.AsyncEvaluator`): the prior is the
    pruner (uniform over the distinct legal answers of `k` samples; every legal action when none is
    legal, the LLM fails or the time is spent), the value the critic of `critic` (rule, llm or
    both, summed) for the searching player, its negation for the other (two-player zero-sum)."""

    def __init__(
        self, strategy: LlmMctsStrategy, root: int, budget: Budget, meter: UsageMeter, order_seed: int
    ) -> None:
        self.s, self.o, self.root, self.budget, self.meter = strategy, strategy.o, root, budget, meter
        # One draw per decision (`LLMStrategy.order_rng`); each node's order then follows from it and
        # the node's history, so simulations in flight together shuffle the same way in any interleaving.
        self.order_seed = order_seed

    async def prior(self, state: pyspiel.State) -> list[tuple[int, float]]:
        actions = await self._prune(state)
        return [(a, 1 / len(actions)) for a in actions]

    async def evaluate(self, state: pyspiel.State) -> list[float]:
        value = await self._value(state)
        return [value if p == self.root else -value for p in range(state.num_players())]

    async def _prune(self, state: pyspiel.State) -> list[int]:
        budget, o = self.budget, self.o
        player = state.current_player()
        by_text = {state.action_to_string(player, a): a for a in state.legal_actions()}
        if budget.spent(0.05):
            return list(by_text.values())
        order = random.Random(f"{self.order_seed}:{state.history_str()}") if o.shuffle_legal else None
        texts = shown_order(list(by_text), order)
        try:
            result = await self.s.llm.chat(
                [("user", pruner_prompt(state, texts))],
                choices=texts,
                constrain=o.constrain,
                n=o.k,
                temperature=o.temperature,
                max_tokens=o.max_tokens,
                deadline=budget.deadline,
            )
        except LLMError:
            return list(by_text.values())
        self.meter.bad_outputs += sum(1 for c in result.choices if c is None)
        kept = [by_text[c] for c in dict.fromkeys(c for c in result.choices if c is not None)]
        return kept or list(by_text.values())

    async def _value(self, state: pyspiel.State) -> float:
        root = self.root
        chess = state.get_game().get_type().short_name == "chess"
        if state.is_terminal():
            return float(state.returns()[root]) * (10.0 if chess else 1.0)
        value = 0.0
        if self.o.critic in ("rule", "both") and chess:
            value += chess_material(state, root)
        if self.o.critic in ("llm", "both") and not self.budget.spent(0.05):
            value += await self._llm_critic(state)
        return value

    async def _llm_critic(self, state: pyspiel.State) -> float:
        prompt = (
            f"Game: {state.get_game().get_type().long_name}.\nState:\n{state}\n\n"
            f"Evaluate the position for player {self.root} in centipawns, from -1000 (certain loss) to "
            '1000 (certain win). Answer with JSON of the form {"score": <your integer>}.'
        )
        schema = {
            "type": "object",
            "properties": {"score": {"type": "integer", "minimum": -1000, "maximum": 1000}},
            "required": ["score"],
        }
        try:
            result = await self.s.llm.chat(
                [("user", prompt)],
                schema=schema if self.o.constrain else None,
                temperature=self.o.critic_temperature,
                max_tokens=self.o.max_tokens,
                deadline=self.budget.deadline,
            )
        except LLMError:
            return 0.0
        m = re.search(r"-?\d+(?:\.\d+)?", result.text)
        if not m:
            return 0.0
        return max(-1000.0, min(1000.0, float(m.group()))) / 1000


Tree = dict[tuple[int, ...], Node[int]]


class LlmMctsStrategy(LLMStrategy):
    kind = "llm_mcts"
    Options = LlmMctsOptions

    def __init__(self, options: LlmMctsOptions, client: LLMClient | None = None) -> None:
        super().__init__(options, client)
        self.o: LlmMctsOptions = options

    async def think(self, turn: Turn, ctx: MatchContext, budget: Budget, meter: UsageMeter) -> Decision:
        state = rebuild(turn)
        root = state.current_player()
        evaluator = PrunerCritic(self, root, budget, meter, self.order_rng(turn).getrandbits(64))
        tree: Tree = {}
        pruning: dict[tuple[int, ...], asyncio.Task[list[tuple[int, float]]]] = {}
        sims = 0
        while sims < self.o.simulations:
            if budget.spent(0.05) and tree:
                break
            batch = min(self.o.parallel, self.o.simulations - sims)
            await asyncio.gather(
                *(self._simulate(state, root, tree, pruning, evaluator) for _ in range(batch))
            )
            sims += batch
        top = tree.get(())
        if top is None or not top.visits:
            raise LLMError("no simulation finished in time")
        best = max(top.visits.values())
        action = self.rng.choice([a for a, c in top.visits.items() if c == best])
        stats = MoveStats(
            nodes=len(tree), depth=self.o.depth, simulations=sims, pruned_actions=len(top.actions or [])
        )
        note = "visits " + ", ".join(f"{state.action_to_string(root, a)}={c}" for a, c in top.visits.items())
        return Decision(action=action, stats=stats, note=note[:300])

    async def _simulate(
        self,
        state: pyspiel.State,
        root: int,
        tree: Tree,
        pruning: dict[tuple[int, ...], asyncio.Task[list[tuple[int, float]]]],
        evaluator: AsyncEvaluator[pyspiel.State],
    ) -> None:
        path: list[tuple[Node[int], int, float]] = []  # (node, action, virtual loss charged)
        key: tuple[int, ...] = ()
        s = state
        for _ in range(self.o.depth):
            while s.is_chance_node():
                outcomes, probs = zip(*s.chance_outcomes(), strict=True)
                a = self.rng.choices(outcomes, weights=probs)[0]
                s = s.child(a)
                key = (*key, a)
            if s.is_terminal():
                break
            node = await self._node(s, key, tree, pruning, evaluator)
            maximizing = s.current_player() == root
            sign = 1.0 if maximizing else -1.0
            a = polynomial_select(node, sign, self.o.beta, self.o.alpha_over_xi, self.o.eta)
            loss = -self.o.virtual_loss if maximizing else self.o.virtual_loss  # against the mover
            node.total += 1
            node.visits[a] = node.visits.get(a, 0) + 1
            node.value[a] = node.value.get(a, 0.0) + loss
            path.append((node, a, loss))
            s = s.child(a)
            key = (*key, a)
        value = (await evaluator.evaluate(s))[root]
        for node, a, loss in path:
            node.value[a] += value - loss

    async def _node(
        self,
        state: pyspiel.State,
        key: tuple[int, ...],
        tree: Tree,
        pruning: dict[tuple[int, ...], asyncio.Task[list[tuple[int, float]]]],
        evaluator: AsyncEvaluator[pyspiel.State],
    ) -> Node[int]:
        """The tree node of `key`, made on first visit from the prior's actions; simulations that
        reach it while the pruner is asked wait for that one answer."""
        node = tree.get(key)
        if node is not None:
            return node
        task = pruning.get(key)
        if task is None:
            task = pruning[key] = asyncio.ensure_future(evaluator.prior(state))
        prior = await task
        return tree.setdefault(key, Node([a for a, _ in prior]))


__all__ = ["LlmMctsOptions", "LlmMctsStrategy", "PrunerCritic", "chess_material"]
