"""One tree search core for the agents' three searches: the information-set MCTS of `mcts`
(`agents.mcts_agent`, on OpenSpiel states), the (IS)MCTS that runs next to a code world model
(`agents.cwm.harness`, on the model's JSON states, inside the sandbox) and LLM-MCTS
(`agents.llm_mcts`, the LLM as pruner and critic).

What they share:

- `Evaluator` / `AsyncEvaluator`: OpenSpiel's `mcts.Evaluator` shape, `evaluate(state)` (one
  value per player) and `prior(state)` (`(action, probability)` pairs). Random rollouts, a
  synthesized value function and the LLM critic are evaluators; the LLM pruner is a prior.
  Convention: an empty prior means uniform over the legal actions (the cheap common case: no
  list built per new node).
- `Node`: per-action statistics in dicts (visits, summed value, availability), the prior's
  actions, and the node's own visit count.
- Selection rules: `uct_select` (UCB1, availability counts standing for the parent's visits as
  in information-set MCTS) and `polynomial_select` (the polynomial bonus of the LLM-MCTS paper,
  eq. 4.1).
- `backup`: a finished simulation's value, added along its path for the player who acted.
- `search`: the loop of UCT with one new node per simulation, on any `Rules` (how a state is
  played) from any `new_root` (one state, or a fresh determinization each time), keyed by
  action history or by the acting player's information set, with optional intermediate rewards
  and a set of exceptions that count a simulation as failed instead of ending the search.
  `mcts` and the harness both run it; LLM-MCTS keeps its own asynchronous loop (a fixed depth
  every simulation, a batch of simulations in flight with virtual loss) over the same parts.

Pure Python on purpose (no pyspiel, no pydantic, no numpy): the harness imports this inside the
sandbox, where only the standard library and our pure modules are loaded.

Limits: `search` plays chance and simultaneous nodes through `Rules.sample` (no tree nodes
there); `polynomial_select` is for two-player zero-sum values (`sign` flips the min player's).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

A = TypeVar("A", bound=Hashable)
S = TypeVar("S")
S_contra = TypeVar("S_contra", contravariant=True)

# OpenSpiel's player ids, which the code world model API shares (chance -1, terminal -4).
CHANCE = -1
SIMULTANEOUS = -2
TERMINAL = -4


class Evaluator(Protocol[S_contra]):
    """OpenSpiel's `mcts.Evaluator`: a state's value for every player, and a prior over its actions."""

    def evaluate(self, state: S_contra) -> Sequence[float]: ...

    def prior(self, state: S_contra) -> list[tuple[Any, float]]: ...


class AsyncEvaluator(Protocol[S_contra]):
    """`Evaluator` for evaluations that wait on something (an LLM on the event loop)."""

    async def evaluate(self, state: S_contra) -> Sequence[float]: ...

    async def prior(self, state: S_contra) -> list[tuple[Any, float]]: ...


class Rules(Protocol[S]):
    """How `search` plays a state. `player` is OpenSpiel's (>= 0, CHANCE, SIMULTANEOUS, TERMINAL);
    `apply` returns the next state (it may be the same object, changed); `sample` plays a chance or
    simultaneous node at random and says what it played; `infoset` keys a node by what `player`
    knows; `rewards` (only read when `intermediate_rewards`) are the rewards of the last step."""

    num_players: int
    info_sets: bool
    intermediate_rewards: bool

    def player(self, state: S) -> int: ...

    def legal(self, state: S) -> list[Any]: ...

    def apply(self, state: S, action: Any) -> S: ...

    def sample(self, state: S, player: int, rng: random.Random) -> tuple[S, Any]: ...

    def infoset(self, state: S, player: int) -> Hashable: ...

    def rewards(self, state: S) -> Sequence[float]: ...


class Node(Generic[A]):
    """Statistics of one tree node: per action its visits, summed value and availability."""

    __slots__ = ("actions", "avail", "total", "value", "visits")

    def __init__(self, actions: list[A] | None = None) -> None:
        self.visits: dict[A, int] = {}
        self.value: dict[A, float] = {}
        self.avail: dict[A, int] = {}
        self.actions = actions  # the prior's actions (None: every legal action)
        self.total = 0  # visits of the node itself (polynomial_select's N(s))


def uct_select(
    legal: Sequence[A],
    visits: Mapping[A, int],
    value: Mapping[A, float],
    avail: Mapping[A, int],
    uct_c: float,
    rng: random.Random,
) -> A:
    """An unvisited legal action at random, else the legal action of highest UCB1 score
    (mean value plus `uct_c * sqrt(ln(avail) / visits)`; the first on ties)."""
    unvisited = [a for a in legal if a not in visits]
    if unvisited:
        return rng.choice(unvisited)
    score = {a: value[a] / visits[a] + uct_c * math.sqrt(math.log(avail[a]) / visits[a]) for a in legal}
    return max(legal, key=score.__getitem__)


def polynomial_select(node: Node[A], sign: float, beta: float, alpha_over_xi: float, eta: float) -> A:
    """The first unvisited of the node's actions, else the highest `sign * mean + bonus`, the bonus
    `beta * N(s)**(alpha/xi) / n(s,a)**(1-eta)` (LLM-MCTS paper eq. 4.1, after Shah et al. 2020)."""
    actions = node.actions or []
    unvisited = [a for a in actions if a not in node.visits]
    if unvisited:
        return unvisited[0]
    scale = beta * max(1, node.total) ** alpha_over_xi

    def score(a: A) -> float:
        return sign * node.value[a] / node.visits[a] + scale / node.visits[a] ** (1 - eta)

    return max(actions, key=score)


def backup(
    path: Sequence[tuple[Node[A], A, int]], leaf: Sequence[float], rewards: Sequence[float] | None
) -> None:
    """Count a finished simulation: each (node, action, player) of its path gets a visit and the
    player's value (`rewards` gathered on the way, if any, plus the leaf's)."""
    if rewards is None:
        for node, action, player in path:
            node.visits[action] = node.visits.get(action, 0) + 1
            node.value[action] = node.value.get(action, 0.0) + leaf[player]
        return
    for node, action, player in path:
        node.visits[action] = node.visits.get(action, 0) + 1
        node.value[action] = node.value.get(action, 0.0) + rewards[player] + leaf[player]


def add_rewards(acc: list[float], rewards: Sequence[float]) -> None:
    for i, r in enumerate(list(rewards)[: len(acc)]):
        acc[i] += float(r)


class Search(Generic[A]):
    """What `search` leaves: the tree, the key of the first decision node, and the counts."""

    __slots__ = ("failures", "root_key", "simulations", "tree")

    def __init__(self) -> None:
        self.tree: dict[Hashable, Node[A]] = {}
        self.root_key: Hashable | None = None
        self.simulations = 0
        self.failures = 0

    def root_visits(self, key: Hashable | None = None) -> dict[A, int]:
        """Visit counts of the root's actions (the root: `key`, else the first decision node)."""
        node = self.tree.get(self.root_key if key is None else key)
        return dict(node.visits) if node is not None else {}


def search(
    rules: Rules[S],
    new_root: Callable[[], S],
    evaluator: Evaluator[S],
    simulations: int,
    uct_c: float,
    rng: random.Random,
    time_limit: float = 1e9,
    catch: tuple[type[Exception], ...] = (),
) -> Search[Any]:
    """UCT from `new_root()` each simulation, one new node per simulation, the leaf valued by
    `evaluator`. Stops after `simulations` or `time_limit` seconds; a simulation that raises one of
    `catch` is a failure, and more than max(10, simulations / 2) failures end the search."""
    out: Search[Any] = Search()
    tree = out.tree
    end = time.monotonic() + time_limit
    info_sets = rules.info_sets
    gather = rules.intermediate_rewards
    # Bound once: this loop is the hot path of every search (attribute lookups cost here).
    player_of, legal_of, apply, rewards_of = rules.player, rules.legal, rules.apply, rules.rewards
    prior_of, leaf_value = evaluator.prior, evaluator.evaluate
    for _ in range(simulations):
        if time.monotonic() > end:
            break
        state = new_root()
        path: list[tuple[Node[Any], Any, int]] = []
        history: tuple[Any, ...] = ()  # the key while nodes are keyed by the actions played
        expanded = False
        acc = [0.0] * rules.num_players if gather else None
        try:
            while True:
                player = player_of(state)
                if player == TERMINAL:
                    break
                if player < 0:
                    state, action = rules.sample(state, player, rng)
                    if not info_sets:
                        history = (*history, action)
                    if acc is not None:
                        add_rewards(acc, rewards_of(state))
                    continue
                legal = legal_of(state)
                key = rules.infoset(state, player) if info_sets else history
                if out.root_key is None:
                    out.root_key = key
                node = tree.get(key)
                if node is None:
                    if expanded:
                        break
                    prior = prior_of(state)
                    node = tree[key] = Node([a for a, p in prior if p > 0] if prior else None)
                    expanded = True
                if node.actions is not None:
                    legal = [a for a in legal if a in node.actions]
                for a in legal:
                    node.avail[a] = node.avail.get(a, 0) + 1
                action = uct_select(legal, node.visits, node.value, node.avail, uct_c, rng)
                path.append((node, action, player))
                if not info_sets:
                    history = (*history, action)
                state = apply(state, action)
                if acc is not None:
                    add_rewards(acc, rewards_of(state))
            leaf = leaf_value(state)
        except catch:
            out.failures += 1
            if out.failures > max(10, simulations // 2):
                break
            continue
        backup(path, leaf, acc)
        out.simulations += 1
    return out
