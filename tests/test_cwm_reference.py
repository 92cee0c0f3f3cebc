"""Every hand-written reference model (agents/cwm/reference) scores 1.0 on its game's unit tests
(open deck; imperfect-information games closed deck too), so `spielbus cwm eval` has a known-good
row for each game; and the `cwm` agent plays a parametrized game (generalized tic-tac-toe)."""

from __future__ import annotations

import pytest

from agents.cwm.reference import REFERENCE, reference_code
from agents.cwm.sandbox import Limits, SandboxUnavailable, check_available
from games.loader import load_game
from games.view import is_perfect_information
from research.cwm import trajectories as T
from research.cwm.candidate import run_candidate

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)


@pytest.mark.parametrize("game", sorted(REFERENCE))
def test_reference_model_passes_every_test(game: str):
    g = load_game(game)
    trajs = T.played_trajectories(game, 4, seed=7, mcts_share=0.5, simulations=20)
    decks = [False] if is_perfect_information(g) else [False, True]
    for closed in decks:
        tests = T.build_tests(g, trajs, closed, seed=7)
        run = run_candidate(reference_code(game), tests, imperfect=not is_perfect_information(g),
                            limits=Limits(cpu_s=300), tests_timeout_s=280)  # fmt: skip
        v = run.verdict
        assert v.reason is None and v.passed == v.total > 0, (
            game,
            closed,
            v.reason,
            v.detail,
            v.failures[:1],
        )


async def test_cwm_agent_plays_generalized_tic_tac_toe(nc, tmp_path):
    """A parametrized game: the turn's `mnk(k=4,m=6,n=6)` is the model's `mnk(m=6,n=6,k=4)`."""
    from agents.cwm.agent import CwmStrategy
    from agents.random_agent import RandomStrategy
    from research.cwm.model_files import write_reference_dir
    from tests.helpers import play, serving, spec, uid

    write_reference_dir(tmp_path, "mnk(m=6,n=6,k=4)")
    cwm = CwmStrategy(CwmStrategy.Options.model_validate({"model": str(tmp_path), "simulations": 20,
                                                          "rollouts": 1, "seed": 1}))  # fmt: skip
    me, rnd = uid("cwm"), uid("rnd")
    try:
        async with serving(nc, cwm, me), serving(nc, RandomStrategy.from_options({"seed": 3}), rnd):
            rec = await play(nc, spec("mnk(m=6,n=6,k=4)", [me, rnd], seed=1, deadline_ms=20000))
    finally:
        await cwm.close()
    mine = [m for m in rec.moves if m.agent == me]
    assert not rec.faults and mine and mine[-1].stats is not None
    stats = mine[-1].stats.model_dump()
    assert stats["model_failures"] == 0 and stats["online_transition_accuracy"] == 1.0
