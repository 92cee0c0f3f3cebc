"""Monte Carlo CFVFP (research/coach/mccfvfp.py) and the benchmark against OpenSpiel's MCCFR at its
smallest setting (benchmarks/cfvfp.py --part mc)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pyspiel
from open_spiel.python import policy as policy_lib

from research.coach.cfvfp import exploitability
from research.coach.mccfvfp import ESCFVFP, ESMCCFR, OSCFVFP, best_response, table

ROOT = Path(__file__).resolve().parents[1]


def test_best_response_is_pure_with_ties_split() -> None:
    assert best_response(np.array([1.0, 3.0, -2.0]), 3).tolist() == [0.0, 1.0, 0.0]
    assert best_response(np.array([2.0, 2.0, 0.0]), 3).tolist() == [0.5, 0.5, 0.0]


def test_sampled_cfvfp_learns_kuhn_and_counts_nodes() -> None:
    game = pyspiel.load_game("kuhn_poker")
    tab = policy_lib.TabularPolicy(game)
    uniform = exploitability(game, {})
    for cls in (ESCFVFP, OSCFVFP, ESMCCFR):
        np.random.seed(1)
        solver = cls(game)
        for _ in range(300):
            solver.iteration()
        assert solver.nodes > 300 * 2  # at least the root of each player's traversal, every iteration
        policy = table(solver, tab)
        assert len(policy) == 12  # Kuhn's information sets, all visited
        for probs in policy.values():
            assert abs(sum(probs.values()) - 1) < 1e-9
        assert exploitability(game, policy) < uniform / 2, cls.__name__
    # The CFVFP solvers play pure best responses: each current policy is one-hot (or a split tie).
    np.random.seed(1)
    solver = ESCFVFP(game)
    for _ in range(50):
        solver.iteration()
    for regrets, _avg in solver._infostates.values():
        current = solver._regret_matching(regrets, len(regrets))
        assert set(np.round(current, 9).tolist()) <= {0.0, 0.5, 1.0}


def test_the_benchmark_smallest_setting_prints_curves_a_verdict_and_a_plot(tmp_path: Path) -> None:
    png = tmp_path / "mc.png"
    out = subprocess.run(
        [sys.executable, "benchmarks/cfvfp.py", "--games", "kuhn_poker", "--nodes", "3000", "--seeds", "1",
         "--plot", str(png)],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    for name in ("ES-MCCFVFP", "OS-MCCFVFP", "ES-MCCFR", "OS-MCCFR"):
        assert out.stdout.count(name) >= 2, out.stdout  # a curve row and a nodes-to-target row
    assert "verdict (kuhn_poker):" in out.stdout
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
