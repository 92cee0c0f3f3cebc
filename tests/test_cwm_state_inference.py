"""Hidden-state inference (appendix H.4 of "Code World Models for General Game Playing"): the
model's `resample_state(obs_action_history, player_id)` gives a state, not a history; its unit
test asks that the state show the seat its last observation (and, since the agent searches from
it, that it be the seat's turn). Reference models pass, wrong ones fail, the agent plays with it."""

from __future__ import annotations

import pytest

from agents.cwm.agent import CwmStrategy
from agents.cwm.reference import reference_code
from agents.cwm.sandbox import Limits, SandboxUnavailable, check_available
from agents.random_agent import RandomStrategy
from games.loader import load_game
from research.cwm import prompts as P
from research.cwm import trajectories as T
from research.cwm.candidate import Verdict, run_candidate
from research.cwm.model_files import write_reference_dir
from tests.helpers import play, serving, spec, uid

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)

KUHN = reference_code("kuhn_poker")
# Deals the seat the card after its own: the observation shows the wrong card.
WRONG_CARD = KUHN + (
    "\ndef resample_state(obs_action_history, player_id):\n"
    "    mine = (int(obs_action_history[-1][0][0]) + 1) % 3\n"
    "    deals = [mine, (mine + 1) % 3] if player_id == 0 else [(mine + 1) % 3, mine]\n"
    "    state = {'history': [], 'text': ''}\n"
    "    for a in [f'Deal:{c}' for c in deals]:\n"
    "        state = apply_action(state, a)\n"
    "    return state\n"
)
# Right cards, but the state is the deal's, before any betting: not the seat's observation later.
NO_BETS = KUHN + (
    "\ndef resample_state(obs_action_history, player_id):\n"
    "    actions = resample_history(obs_action_history, player_id)[:2]\n"
    "    state = {'history': [], 'text': ''}\n"
    "    for a in actions:\n"
    "        state = apply_action(state, a)\n"
    "    return state\n"
)


def verdict(code: str, game: str) -> Verdict:
    g = load_game(game)
    tests = T.build_tests(g, T.random_trajectories(game, 6, 4), False, seed=4, inference="state")
    assert tests and any(t.get("inference") == "state" for t in tests)
    run = run_candidate(code, tests, imperfect=True, limits=Limits(cpu_s=120), tests_timeout_s=110,
                        inference="state")  # fmt: skip
    return run.verdict


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker"])
def test_reference_models_pass_the_hidden_state_tests(game: str):
    v = verdict(reference_code(game), game)
    assert v.reason is None and v.passed == v.total > 0, v.failures[:1]


@pytest.mark.parametrize("code", [WRONG_CARD, NO_BETS], ids=["wrong_card", "no_bets"])
def test_wrong_state_inference_fails(code: str):
    v = verdict(code, "kuhn_poker")
    assert v.reason is None and v.passed < v.total
    assert any(f["message"].startswith("AssertionError: get_observations(resample_state") for f in v.failures)


def test_a_model_without_resample_state_does_not_load():
    code = KUHN.replace("def resample_state(", "def _unused(")
    tests = T.build_tests(
        load_game("kuhn_poker"), T.random_trajectories("kuhn_poker", 1, 1), False, inference="state"
    )
    v = run_candidate(code, tests, imperfect=True, inference="state").verdict
    assert v.reason == "api" and "resample_state" in v.detail


def test_prompt_asks_for_resample_state():
    sig = P.signature(True, False, "state")
    assert "def resample_state(" in sig and "def resample_history(" not in sig
    g = load_game("kuhn_poker")
    tests = T.build_tests(g, T.random_trajectories("kuhn_poker", 1, 2), False, inference="state")
    test = next(t for t in tests if t["kind"] == "inference")
    code = P.render_test(test)
    assert "resampled_state = resample_state(obs_action_history, player_id)" in code
    assert "get_observations(resampled_state)[player_id]" in code


async def test_cwm_agent_resamples_states(nc, tmp_path):
    write_reference_dir(tmp_path, "kuhn_poker", inference="state")
    cwm = CwmStrategy(CwmStrategy.Options.model_validate({"model": str(tmp_path), "simulations": 60,
                                                          "rollouts": 1, "seed": 1}))  # fmt: skip
    me, rnd = uid("cwm"), uid("rnd")
    try:
        async with serving(nc, cwm, me), serving(nc, RandomStrategy.from_options({"seed": 3}), rnd):
            recs = [await play(nc, spec("kuhn_poker", [me, rnd] if i % 2 == 0 else [rnd, me], seed=i,
                                        deadline_ms=20000)) for i in range(2)]  # fmt: skip
    finally:
        await cwm.close()
    for rec in recs:
        mine = [m for m in rec.moves if m.agent == me]
        assert not rec.faults and mine and mine[-1].stats is not None
        stats = mine[-1].stats.model_dump()
        assert stats["model_failures"] == 0 and stats["simulations"] > 0
        assert stats["online_inference_accuracy"] == 1.0 and stats["online_transition_accuracy"] == 1.0


def test_synthesize_refuses_state_inference_with_a_closed_deck(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    env = {
        "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
    }
    proc = subprocess.run(
        [sys.executable, "-m", "research.cwm", "synthesize", "kuhn_poker", "--llm", "http://127.0.0.1:9/v1",
         "--closed-deck", "--inference", "state", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert (
        proc.returncode == 2
        and "--inference state is hidden-state inference with an open deck" in proc.stderr
    )
