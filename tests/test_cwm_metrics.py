"""CWM metrics that catch wrong models (issue 27): closed-deck tests check the reward at terminal
observations, and inference tests reject resampled histories that are impossible in the true
game (a card dealt twice). Known-good reference models still pass everything."""

from __future__ import annotations

import pytest

from agents.cwm.reference import reference_code
from agents.cwm.sandbox import Limits, SandboxUnavailable, check_available
from games.loader import load_game
from research.cwm import trajectories as T
from research.cwm.candidate import Verdict, run_candidate

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)

KUHN = reference_code("kuhn_poker")
# Payoffs with the showdown's winner swapped: a wrong model whose inference is perfect.
WRONG_PAYOFFS = KUHN + (
    "\n_true_rewards = get_rewards\ndef get_rewards(state):\n    return [-r for r in _true_rewards(state)]\n"
)
# An inference function that deals the seat's own card to the opponent too.
DUPLICATE_DEAL = KUHN + (
    "\ndef resample_history(obs_action_history, player_id, last_is_terminal=False):\n"
    "    last = obs_action_history[-1][0]\n"
    "    mine, bets = int(last[0]), last[1:]\n"
    "    inverse = {v: k for k, v in MOVES.items()}\n"
    "    return [f'Deal:{mine}', f'Deal:{mine}'] + [inverse[b] for b in bets]\n"
)


def verdict(code: str, game: str, closed: bool, seed: int = 4) -> Verdict:
    g = load_game(game)
    tests = T.build_tests(g, T.random_trajectories(game, 6, seed), closed, seed=seed)
    return run_candidate(code, tests, imperfect=True, limits=Limits(cpu_s=120), tests_timeout_s=110).verdict


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker"])
@pytest.mark.parametrize("closed", [False, True])
def test_reference_models_pass_the_stricter_tests(game: str, closed: bool):
    v = verdict(reference_code(game), game, closed)
    assert v.reason is None and v.passed == v.total > 0, v.failures[:1]


def test_closed_deck_catches_wrong_payoffs():
    v = verdict(WRONG_PAYOFFS, "kuhn_poker", closed=True)
    assert v.reason is None and v.passed < v.total
    assert any("get_rewards(terminal state)" in f["message"] for f in v.failures)


@pytest.mark.parametrize("closed", [False, True])
def test_inference_rejects_a_card_dealt_twice(closed: bool):
    v = verdict(DUPLICATE_DEAL, "kuhn_poker", closed=closed)
    assert v.reason is None and v.passed < v.total
    assert any("chance outcome" in f["message"] and "impossible" in f["message"] for f in v.failures)
