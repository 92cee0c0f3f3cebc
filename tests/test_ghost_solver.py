"""`ghost_solver` against the game tree: it never loses from a position the tree says is won.

The tree value comes from a plain negamax over the pyspiel states themselves (every
legal action, bluffs and challenges included), independent of the solver's code.
"""

from __future__ import annotations

import random
from pathlib import Path

import pyspiel
import pytest

from agents.base import MatchContext, StrategyOptions
from agents.ghost_solver import GhostSolverStrategy
from bus.protocol import GameSpec, LegalAction, Turn
from games.loader import load_game
from games.word.common import LETTERS
from games.word.ghost import CHALLENGE
from games.word.ghost_values import GhostSolver

WORDS = ["apple", "apply", "apt", "bandit", "band", "bank", "cabin", "cab", "cable", "dog", "doge", "dodge"]


@pytest.fixture
def spec(tmp_path: Path) -> GameSpec:
    path = tmp_path / "ghost.txt"
    path.write_text("\n".join(WORDS) + "\n", encoding="utf-8")
    return GameSpec(name="ghost", params={"words": str(path), "min_word_length": 4})


def tree_value(state: pyspiel.State, memo: dict[str, float]) -> float:
    """Value for the player to move (negamax over every legal action; challenge tried first
    so that a dead fragment costs one node)."""
    if state.is_terminal():
        raise AssertionError("called on a terminal state")
    key = state.fragment
    if key in memo:
        return memo[key]
    me = state.current_player()
    best = -1.0
    for a in sorted(state.legal_actions(), key=lambda a: a != CHALLENGE):
        child = state.clone()
        child.apply_action(a)
        v = child.returns()[me] if child.is_terminal() else -tree_value(child, memo)
        best = max(best, v)
        if best == 1.0:
            break
    memo[key] = best
    return best


def live_positions(state: pyspiel.State) -> list[pyspiel.State]:
    """Every reachable state whose fragment is a proper prefix of a word (not a word)."""
    out = [state]
    for a in range(26):
        child = state.clone()
        child.apply_action(a)
        if not child.is_terminal() and child.fragment in child.get_game().prefixes:
            out.extend(live_positions(child))
    return out


def solver_never_loses(state: pyspiel.State, solver: GhostSolver, me: int, rng: random.Random) -> bool:
    """Exhaustive over every opponent reply; the solver moves for `me`."""
    if state.is_terminal():
        return state.returns()[me] > 0
    if state.current_player() == me:
        can_add = any(a != CHALLENGE for a in state.legal_actions())
        a, _ = solver.best_action(state.fragment, rng, can_add)
        child = state.clone()
        child.apply_action(a)
        return solver_never_loses(child, solver, me, rng)
    for a in state.legal_actions():
        child = state.clone()
        child.apply_action(a)
        if not solver_never_loses(child, solver, me, rng):
            return False
    return True


def test_solver_values_match_the_game_tree_and_it_never_loses_a_won_position(spec: GameSpec) -> None:
    game = load_game(spec)
    solver = GhostSolver(str(spec.params["words"]), 4)
    memo: dict[str, float] = {}
    won = 0
    for pos in live_positions(game.new_initial_state()):
        value = tree_value(pos, memo)
        assert solver.wins(pos.fragment) == (value == 1.0), pos.fragment
        if value == 1.0:
            won += 1
            me = pos.current_player()
            for seed in range(3):  # the solver draws among winning letters
                assert solver_never_loses(pos.clone(), solver, me, random.Random(seed)), pos.fragment
    assert won >= 5  # the list has several won positions, the opening among them or not


def test_solver_on_the_full_list_knows_the_classic_results() -> None:
    solver = GhostSolver("scowl70", 5)
    # Any letter the opener picks, the second player can answer with a winning letter or not;
    # either way the value is consistent with one-ply lookahead.
    for x in LETTERS:
        assert solver.wins(x) == any(solver.is_live(x + y) and not solver.wins(x + y) for y in LETTERS)
    assert solver.wins("") == any(not solver.wins(x) for x in LETTERS if solver.is_live(x))


async def test_strategy_challenges_a_bluff_and_plays_a_winning_letter(spec: GameSpec) -> None:
    game = load_game(spec)
    bot = GhostSolverStrategy(StrategyOptions(seed=1))

    def turn(actions: list[int]) -> Turn:
        s = game.new_initial_state()
        for a in actions:
            s.apply_action(a)
        p = s.current_player()
        legal = [LegalAction(id=a, text=s.action_to_string(p, a)) for a in s.legal_actions()]
        return Turn(
            match_id="g",
            game=spec,
            seat=p,
            seats=["x", "y"],
            turn=len(actions),
            deadline_ms=5000,
            observation=s.observation_string(p),
            legal_actions=legal,
            state=actions,
        )

    d = await bot.decide(turn([LETTERS.index("q"), LETTERS.index("q")]), MatchContext(match_id="g"))
    assert d.action == CHALLENGE
    solver = GhostSolver(str(spec.params["words"]), 4)
    winners = [f for f in "abcd" if solver.wins(f)]
    assert winners
    for first in winners:  # the player to move after `first` has a win: the bot must find one
        d = await bot.decide(turn([LETTERS.index(first)]), MatchContext(match_id="g"))
        assert d.action is not None and LETTERS[d.action] in solver.winning_letters(first)
