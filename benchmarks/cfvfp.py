"""CFVFP against OpenSpiel's CFR (and fictitious play): exploitability curves, and speed.

Same run, same measuring stick: every average policy is scored by OpenSpiel's Python
`exploitability`. Rows at each checkpoint:

- CFVFP: our solver's default (Ju et al.'s cumulative form, alternating updates);
- CFVFP sim: the same with simultaneous updates;
- XFP: the other reading of the paper's eqs. 4-6 (full best response to the average, by
  counterfactual values; `mode="xfp"`), up to `--xfp-max` iterations (it costs ~10x more);
- CFR: OpenSpiel's C++ `CFRSolver` (vanilla CFR, alternating updates, the same algorithm as its
  Python `CFRSolver`, which would need hours for 10,000 Leduc iterations);
- OS XFP: OpenSpiel's own Python `XFPSolver`, where cheap (Kuhn up to 1,000 iterations; on
  Leduc it costs ~5 s per iteration).

Before the curves, `research.coach.cfvfp_reference` (an independent recursive implementation)
is run for a few iterations and its largest difference from the fast solver printed.
Speed is compared against OpenSpiel's Python CFR, timed here for a few iterations. Goals
(issue 13): CFVFP's exploitability within 2x of CFR's at 10,000 iterations; CFVFP's
iterations per second at least a third of Python CFR's.

    python benchmarks/cfvfp.py [--games kuhn_poker,leduc_poker] [--iterations 100,1000,3000,10000]
"""

from __future__ import annotations

import argparse
import time

import pyspiel
from open_spiel.python.algorithms import cfr as py_cfr
from open_spiel.python.algorithms import exploitability as os_exploitability
from open_spiel.python.algorithms import fictitious_play

from research.coach.cfvfp import CFVFPSolver, exploitability
from research.coach.cfvfp_reference import ReferenceCFVFP

SPEED_ITERS = {"kuhn_poker": 500, "leduc_poker": 10}
REFERENCE_ITERS = {"kuhn_poker": 100, "leduc_poker": 10}
OPENSPIEL_XFP_MAX = {"kuhn_poker": 1000}


def cpp_table(
    solver: pyspiel.CFRSolver, tree_states: dict[str, pyspiel.State]
) -> dict[str, dict[int, float]]:
    pol = solver.average_policy()
    return {
        key: {int(a): float(p) for a, p in pol.action_probabilities(s).items()}
        for key, s in tree_states.items()
    }


def infoset_states(game: pyspiel.Game) -> dict[str, pyspiel.State]:
    """One state per information set (CFR's C++ policy answers per state)."""
    from open_spiel.python import policy as policy_lib

    tab = policy_lib.TabularPolicy(game)
    return {key: tab.states[i] for key, i in tab.state_lookup.items()}


def reference_check(game: pyspiel.Game, iterations: int) -> None:
    fast, ref = CFVFPSolver(game), ReferenceCFVFP(game)
    fast.iterate(iterations)
    ref.iterate(iterations)
    a, b = fast.average_policy(), ref.average_policy()
    worst = max(abs(a[k][act] - b[k][act]) for k in a for act in a[k])
    print(f"independent reference implementation, {iterations} iterations: max |difference| {worst:.1e}")


def run(game_name: str, checkpoints: list[int], xfp_max: int) -> None:
    game = pyspiel.load_game(game_name)
    t0 = time.perf_counter()
    ours = CFVFPSolver(game)
    build_s = time.perf_counter() - t0
    sim = CFVFPSolver(game, alternating=False, tree=ours.tree)
    xfp = CFVFPSolver(game, mode="xfp", tree=ours.tree)
    os_xfp = fictitious_play.XFPSolver(game)
    os_xfp_max = OPENSPIEL_XFP_MAX.get(game_name, 0)
    cfr = pyspiel.CFRSolver(game)
    states = infoset_states(game)
    print(
        f"\n{game_name}: {ours.tree.num_nodes} histories, {ours.tree.num_infosets} information sets "
        f"(tree built in {build_s:.2f}s)"
    )
    reference_check(game, REFERENCE_ITERS.get(game_name, 10))
    head = ("iterations", "CFVFP", "CFVFP sim", "XFP", "OS XFP", "CFR", "ratio", "CFVFP s", "C++ CFR s")
    print("{:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>8} {:>9}".format(*head))
    done = 0
    ours_s = cfr_s = 0.0
    for target in checkpoints:
        step = target - done
        t = time.perf_counter()
        ours.iterate(step)
        ours_s += time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(step):
            cfr.evaluate_and_update_policy()
        cfr_s += time.perf_counter() - t
        sim.iterate(step)
        e_ours = exploitability(game, ours.average_policy())
        e_sim = exploitability(game, sim.average_policy())
        e_cfr = exploitability(game, cpp_table(cfr, states))
        e_xfp = e_os = "-"
        if target <= xfp_max:
            xfp.iterate(step)
            e_xfp = f"{exploitability(game, xfp.average_policy()):.6f}"
        if target <= os_xfp_max:
            for _ in range(step):
                os_xfp.iteration()
            e_os = f"{os_exploitability.exploitability(game, os_xfp.average_policy()):.6f}"
        done = target
        print(
            f"{target:>10} {e_ours:>10.6f} {e_sim:>10.6f} {e_xfp:>10} {e_os:>10} {e_cfr:>10.6f} "
            f"{e_ours / e_cfr:>6.2f} {ours_s:>8.1f} {cfr_s:>9.1f}",
            flush=True,
        )
    py = py_cfr.CFRSolver(game)
    n = SPEED_ITERS.get(game_name, 10)
    t = time.perf_counter()
    for _ in range(n):
        py.evaluate_and_update_policy()
    py_rate = n / (time.perf_counter() - t)
    ours_rate = done / ours_s
    print(
        f"speed: CFVFP {ours_rate:.1f} it/s, OpenSpiel Python CFR {py_rate:.1f} it/s "
        f"(ratio {ours_rate / py_rate:.2f}; C++ CFR {done / cfr_s:.1f} it/s)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--games", default="kuhn_poker,leduc_poker")
    ap.add_argument("--iterations", default="100,1000,3000,10000", help="checkpoints, increasing")
    ap.add_argument("--xfp-max", type=int, default=1000, help="our XFP reading up to this many iterations")
    args = ap.parse_args()
    checkpoints = sorted(int(x) for x in args.iterations.split(","))
    for name in args.games.split(","):
        run(name.strip(), checkpoints, args.xfp_max)


if __name__ == "__main__":
    main()
