"""The value-function tournament has "no value function" (random rollouts) as an entrant
(appendix D.4 of "Code World Models for General Game Playing"): a candidate is chosen only if it
beats searching without one. Deterministic: seeded searches without time limits."""

from __future__ import annotations

import pytest

from agents.cwm.reference import reference_code
from agents.cwm.sandbox import SandboxUnavailable, check_available
from games.loader import load_game
from research.cwm import trajectories as T
from research.cwm.values import ValueCandidate, check_and_rank

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)

MODEL = reference_code("tic_tac_toe")
# Blind: every non-terminal state is worth the same to everyone (the reward at the end, as H.7 asks).
BLIND = (
    "def value_function(state, player_id):\n"
    "    return float(get_rewards(state)[player_id]) if get_current_player(state) == -4 else 0.0\n"
)
# Exact: the game's minimax value for the player (tic-tac-toe is small enough to solve).
EXACT = """
_memo = {}

def _solve(state):
    key = state["text"]  # the board: 5,478 positions
    if key not in _memo:
        p = get_current_player(state)
        if p == -4:
            _memo[key] = list(get_rewards(state))
        else:
            best = None
            for a in get_legal_actions(state):
                v = _solve(apply_action(state, a))
                if best is None or v[p] > best[p]:
                    best = v
            _memo[key] = best
    return _memo[key]

def value_function(state, player_id):
    return float(_solve(state)[player_id])
"""


def choose(code: str, games: int = 6, simulations: int = 10, no_value: bool = True):
    init = T.initial_state(load_game("tic_tac_toe"))
    states = [{"state": init, "terminal_rewards": None}]
    cands = [ValueCandidate("value_0", code)]
    choice = check_and_rank(MODEL, cands, states, init, 2, games=games, simulations=simulations, seed=3,
                            no_value=no_value)  # fmt: skip
    assert cands[0].ok, cands[0].problem
    return choice


def test_a_blind_value_function_is_not_chosen_over_no_value_function():
    choice = choose(BLIND)
    assert choice.no_value_score is not None and choice.no_value_score >= choice.candidates[0].score
    assert choice.chosen is None
    # Without the entrant, the only candidate is chosen whatever it is worth (the old behaviour).
    alone = choose(BLIND, no_value=False)
    assert alone.chosen == "value_0" and alone.no_value_score is None


def test_a_value_function_that_beats_rollouts_is_chosen():
    # Six simulations: too few for rollouts to see every threat, enough for exact values.
    choice = choose(EXACT, simulations=6)
    assert choice.no_value_score is not None and choice.candidates[0].score > choice.no_value_score
    assert choice.chosen == "value_0"
