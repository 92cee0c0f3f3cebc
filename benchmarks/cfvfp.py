"""CFVFP against OpenSpiel's CFR: exploitability after 100, 1,000 and 10,000 iterations, and speed.

Same run, same measuring stick: both average policies are scored by OpenSpiel's Python
`exploitability`. The CFR curve comes from OpenSpiel's C++ `CFRSolver` (vanilla CFR with
alternating updates, the same algorithm as its Python `CFRSolver`, which would need hours for
10,000 Leduc iterations); speed is compared against OpenSpiel's Python CFR, timed here for a
few iterations. Goals (issue 13): CFVFP's exploitability within 2x of CFR's at 10,000
iterations; CFVFP's iterations per second at least a third of Python CFR's.

    python benchmarks/cfvfp.py [--games kuhn_poker,leduc_poker] [--iterations 100,1000,10000]
"""

from __future__ import annotations

import argparse
import time

import pyspiel
from open_spiel.python.algorithms import cfr as py_cfr

from agents.coach.cfvfp import CFVFPSolver, exploitability

SPEED_ITERS = {"kuhn_poker": 500, "leduc_poker": 10}


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


def run(game_name: str, checkpoints: list[int]) -> None:
    game = pyspiel.load_game(game_name)
    t0 = time.perf_counter()
    ours = CFVFPSolver(game)
    build_s = time.perf_counter() - t0
    cfr = pyspiel.CFRSolver(game)
    states = infoset_states(game)
    print(
        f"\n{game_name}: {ours.tree.num_nodes} histories, {ours.tree.num_infosets} information sets "
        f"(tree built in {build_s:.2f}s)"
    )
    head = ("iterations", "CFVFP expl", "CFR expl", "ratio", "CFVFP s", "C++ CFR s")
    print("{:>10} {:>12} {:>12} {:>7} {:>9} {:>10}".format(*head))
    done = 0
    ours_s = cfr_s = 0.0
    for target in checkpoints:
        t = time.perf_counter()
        ours.iterate(target - done)
        ours_s += time.perf_counter() - t
        t = time.perf_counter()
        for _ in range(target - done):
            cfr.evaluate_and_update_policy()
        cfr_s += time.perf_counter() - t
        done = target
        e_ours = exploitability(game, ours.average_policy())
        e_cfr = exploitability(game, cpp_table(cfr, states))
        row = f"{target:>10} {e_ours:>12.6f} {e_cfr:>12.6f} {e_ours / e_cfr:>7.2f}"
        print(f"{row} {ours_s:>9.1f} {cfr_s:>10.1f}", flush=True)
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
    ap.add_argument("--iterations", default="100,1000,10000", help="checkpoints, increasing")
    args = ap.parse_args()
    checkpoints = sorted(int(x) for x in args.iterations.split(","))
    for name in args.games.split(","):
        run(name.strip(), checkpoints)


if __name__ == "__main__":
    main()
