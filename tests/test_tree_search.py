"""The search core (agents/tree_search.py) on a tiny pure-Python game, and the three searches
that share it: evaluators and priors as OpenSpiel's `Evaluator`, failures counted, selection rules."""

from __future__ import annotations

import random

import pytest

from agents.tree_search import CHANCE, TERMINAL, Node, Search, polynomial_select, search, uct_select

# Nim: a pile of `n`, take 1 or 2, who takes the last wins. State: (pile, player to move).
State = tuple[int, int]


class Nim:
    num_players = 2
    info_sets = False
    intermediate_rewards = False

    def __init__(self, chance_first: bool = False, broken_at: int | None = None) -> None:
        self.chance_first = chance_first
        self.broken_at = broken_at

    def player(self, state: State) -> int:
        pile, mover = state
        if mover == CHANCE:
            return CHANCE
        return TERMINAL if pile == 0 else mover

    def legal(self, state: State) -> list[int]:
        return [a for a in (1, 2) if a <= state[0]]

    def apply(self, state: State, action: int) -> State:
        if self.broken_at is not None and state[0] - action == self.broken_at:
            raise ValueError("a model bug")
        return state[0] - action, 1 - state[1]

    def sample(self, state: State, player: int, rng: random.Random) -> tuple[State, int]:
        extra = rng.choice([0, 1])  # chance adds a stone or not, then player 0 moves
        return (state[0] + extra, 0), extra

    def infoset(self, state: State, player: int) -> object:
        return (player, state[0])

    def rewards(self, state: State) -> list[float]:
        return [0.0, 0.0]


class Rollouts:
    """Random play to the end: +1 for the player who took the last stone, -1 for the other."""

    def __init__(self, rng: random.Random, prior: list[tuple[int, float]] | None = None) -> None:
        self.rng, self._prior, self.priors_asked = rng, prior or [], 0

    def prior(self, state: State) -> list[tuple[int, float]]:
        self.priors_asked += 1
        return self._prior

    def evaluate(self, state: State) -> list[float]:
        pile, mover = state
        while pile > 0:
            pile -= self.rng.choice([a for a in (1, 2) if a <= pile])
            mover = 1 - mover
        winner = 1 - mover  # the one who moved last
        return [1.0 if p == winner else -1.0 for p in range(2)]


def best(result: Search[int]) -> int:
    visits = result.root_visits()
    return max(visits, key=visits.__getitem__)


@pytest.mark.parametrize(("pile", "winning"), [(4, 1), (5, 2), (7, 1), (8, 2)])
def test_finds_the_winning_take(pile: int, winning: int) -> None:
    rng = random.Random(3)
    result = search(Nim(), lambda: (pile, 0), Rollouts(rng), 3000, 1.4, rng)
    assert best(result) == winning and result.simulations == 3000 and result.failures == 0


def test_the_same_seed_searches_the_same_tree() -> None:
    def run() -> dict[int, int]:
        rng = random.Random(11)
        return search(Nim(), lambda: (9, 0), Rollouts(rng), 500, 2.0, rng).root_visits()

    assert run() == run()


def test_a_prior_restricts_the_actions_and_is_asked_once_per_new_node() -> None:
    rng = random.Random(1)
    evaluator = Rollouts(rng, prior=[(1, 1.0), (2, 0.0)])
    result = search(Nim(), lambda: (6, 0), evaluator, 200, 1.4, rng)
    assert set(result.root_visits()) == {1}
    assert all(set(node.visits) <= {1} for node in result.tree.values())
    assert evaluator.priors_asked == len(result.tree)  # an empty prior means every legal action


def test_chance_nodes_are_sampled_and_keyed_by_history() -> None:
    rng = random.Random(2)
    result = search(Nim(), lambda: (4, CHANCE), Rollouts(rng), 400, 1.4, rng)
    # The first decision node follows a chance step: keyed by it, and visited at all.
    assert result.root_key in {(0,), (1,)} and sum(result.root_visits().values()) > 0


def test_information_sets_key_nodes_by_what_the_player_knows() -> None:
    rules = Nim()
    rules.info_sets = True
    rng = random.Random(4)
    result = search(rules, lambda: (5, 0), Rollouts(rng), 300, 1.4, rng)
    assert result.root_key == (0, 5) and all(isinstance(k, tuple) and len(k) == 2 for k in result.tree)


def test_exceptions_to_catch_are_failures_and_others_propagate() -> None:
    rng = random.Random(5)
    result = search(Nim(broken_at=3), lambda: (5, 0), Rollouts(rng), 100, 1.4, rng, catch=(ValueError,))
    assert result.failures > 0 and result.simulations + result.failures <= 100
    with pytest.raises(ValueError, match="model bug"):
        search(Nim(broken_at=3), lambda: (5, 0), Rollouts(rng), 100, 1.4, rng)


def test_too_many_failures_end_the_search() -> None:
    rng = random.Random(6)
    result = search(Nim(broken_at=4), lambda: (5, 0), Rollouts(rng), 1000, 1.4, rng, catch=(ValueError,))
    assert result.failures == 501 and result.simulations < 1000


def test_uct_tries_every_action_before_scoring() -> None:
    rng = random.Random(0)
    assert uct_select([1, 2], {1: 3}, {1: 3.0}, {1: 3, 2: 3}, 1.0, rng) == 2
    # Both visited: the higher mean wins when the bonuses are equal.
    assert uct_select([1, 2], {1: 2, 2: 2}, {1: 0.0, 2: 2.0}, {1: 4, 2: 4}, 1.0, rng) == 2


def test_polynomial_select_follows_eq_4_1() -> None:
    node: Node[int] = Node([1, 2, 3])
    assert polynomial_select(node, 1.0, 1.0, 0.25, 0.5) == 1  # unvisited first, in the prior's order
    node.visits, node.value, node.total = {1: 4, 2: 1, 3: 1}, {1: 4.0, 2: 0.0, 3: -1.0}, 6
    # scores: mean + 6**0.25 / n**0.5 -> 1: 1 + 0.78, 2: 0 + 1.57, 3: -1 + 1.57
    assert polynomial_select(node, 1.0, 1.0, 0.25, 0.5) == 1
    # The min player sees the values negated: 1: -1 + 0.78, 2: 0 + 1.57, 3: 1 + 1.57.
    assert polynomial_select(node, -1.0, 1.0, 0.25, 0.5) == 3
