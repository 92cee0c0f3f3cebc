"""CFVFP measured two ways: Monte Carlo against OpenSpiel's MCCFR, and full-width against CFR.

`--part mc` (the default; issue 28): Ju et al. claim Monte Carlo CFVFP beats the best sampling
CFR variants per node touched and per second. Four solvers on one traversal code
(`research.coach.mccfvfp`: OpenSpiel's Python `external_sampling_mccfr` and
`outcome_sampling_mccfr`, and the same classes with regret matching replaced by CFVFP's best
response), each run to a budget of nodes touched with `--seeds` seeds; at log-spaced node counts
the average policy is scored by OpenSpiel's exploitability (not timed). Printed: exploitability
against nodes touched and CPU seconds (geometric mean over seeds), then the nodes and CPU seconds each
solver needs to reach each target exploitability (median over seeds; "-" = not within budget),
and the verdict: best MC-CFVFP against best MCCFR in nodes to the hardest target both reach.
`--plot FILE` draws both curves per game (matplotlib).

`--part full` (issue 13): full-width CFVFP against OpenSpiel's CFR (and fictitious play) at
equal iterations. Every average policy is scored by OpenSpiel's Python `exploitability`. Rows
at each checkpoint:

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
Speed is compared against OpenSpiel's Python CFR, timed here for a few iterations.

    python benchmarks/cfvfp.py [--part mc|full] [--games kuhn_poker,leduc_poker] [--seeds 2]
        [--nodes kuhn_poker=200000,leduc_poker=1000000] [--plot FILE]
    python benchmarks/cfvfp.py --part full [--iterations 100,1000,3000,10000]
"""

from __future__ import annotations

import argparse
import math
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyspiel
from open_spiel.python.algorithms import cfr as py_cfr
from open_spiel.python.algorithms import exploitability as os_exploitability
from open_spiel.python.algorithms import fictitious_play

from research.coach.cfvfp import CFVFPSolver, exploitability
from research.coach.cfvfp_reference import ReferenceCFVFP
from research.coach.mccfvfp import SOLVERS, table

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


# --- Monte Carlo: MC-CFVFP against OpenSpiel's MCCFR ----------------------------------------------

MC_NODES = {"kuhn_poker": 200_000, "leduc_poker": 1_000_000}
# Target exploitabilities for the "nodes to reach" table (a policy's exploitability, NashConv / 2).
MC_TARGETS = {"kuhn_poker": [0.05, 0.02, 0.01, 0.005], "leduc_poker": [0.5, 0.3, 0.2, 0.1]}


@dataclass
class Curve:
    solver: str
    seed: int
    points: list[tuple[int, float, float]] = field(default_factory=list)  # nodes, seconds, exploitability

    def first(self, target: float) -> tuple[int, float] | None:
        """Nodes and seconds at the first checkpoint from which the exploitability stays at or below
        `target` (sampled curves wobble: a lucky dip that is lost again does not count)."""
        hit = None
        for nodes, secs, expl in self.points:
            if expl > target:
                hit = None
            elif hit is None:
                hit = (nodes, secs)
        return hit


def checkpoints(budget: int, per_decade: int = 4, start: int = 1000) -> list[int]:
    n = max(1, round(per_decade * math.log10(max(budget, start) / start)))
    return sorted({round(start * (budget / start) ** (i / n)) for i in range(n + 1)} | {budget})


def mc_run(game: pyspiel.Game, name: str, budget: int, seed: int, tabular: object) -> Curve:
    np.random.seed(seed)  # OpenSpiel's MCCFR samples with numpy's global generator
    solver = SOLVERS[name](game)
    curve = Curve(name, seed)
    secs = 0.0
    for mark in checkpoints(budget):
        t = time.process_time()  # CPU time: the machine is shared, wall-clock time measures the others
        while solver.nodes < mark:
            solver.iteration()
        secs += time.process_time() - t
        curve.points.append((solver.nodes, secs, exploitability(game, table(solver, tabular))))
    return curve


def _median(xs: list[float]) -> float:
    return float(statistics.median(xs))


def mc_report(game_name: str, curves: list[Curve], targets: list[float]) -> str:
    """The nodes-to-target table and the verdict, as printed."""
    names = list(dict.fromkeys(c.solver for c in curves))
    lines = [f"\n{game_name}: nodes touched (and CPU seconds) to reach an exploitability, median of seeds"]
    lines.append("{:>12} ".format("solver") + " ".join(f"{'<= ' + str(t):>22}" for t in targets))
    reach: dict[tuple[str, float], float | None] = {}
    for name in names:
        row = []
        for t in targets:
            hits = [c.first(t) for c in curves if c.solver == name]
            if any(h is None for h in hits):
                reach[(name, t)] = None
                row.append(f"{'-':>22}")
                continue
            n = _median([float(h[0]) for h in hits if h])
            s = _median([h[1] for h in hits if h])
            reach[(name, t)] = n
            row.append(f"{n:>13,.0f} ({s:>6.1f}s)")
        lines.append(f"{name:>12} " + " ".join(row))
    best = {
        fam: [n for n in names if n.endswith(fam)] for fam in ("MCCFVFP", "MCCFR")
    }  # ES-/OS- variants of each family
    verdict = "neither family reaches even the easiest target within the budget"
    for t in reversed(targets):
        cands = {
            fam: [reach[(n, t)] for n in members if reach.get((n, t)) is not None]
            for fam, members in best.items()
        }
        if cands["MCCFVFP"] and cands["MCCFR"]:
            fp, cfr = min(v for v in cands["MCCFVFP"] if v), min(v for v in cands["MCCFR"] if v)
            word = "fewer" if fp <= cfr else "more"
            verdict = (
                f"to exploitability {t}: best MC-CFVFP {fp:,.0f} nodes, best MCCFR {cfr:,.0f} "
                f"(ratio {fp / cfr:.2f}: MC-CFVFP needs {word} nodes)"
            )
            break
        if cands["MCCFVFP"] or cands["MCCFR"]:
            who = "MC-CFVFP" if cands["MCCFVFP"] else "MCCFR"
            verdict = f"to exploitability {t}: only {who} gets there within the budget"
            break
    lines.append(f"verdict ({game_name}): {verdict}")
    return "\n".join(lines)


def mc_curves_table(game_name: str, curves: list[Curve]) -> str:
    names = list(dict.fromkeys(c.solver for c in curves))
    lines = [f"\n{game_name}: exploitability (geometric mean over seeds) at nodes touched [CPU seconds]"]
    marks = [p[0] for p in curves[0].points]
    lines.append("{:>12} ".format("nodes ~") + " ".join(f"{m:>10,}" for m in marks))
    for name in names:
        mine = [c for c in curves if c.solver == name]
        k = len(mine[0].points)
        expl = [math.exp(statistics.fmean(math.log(c.points[i][2]) for c in mine)) for i in range(k)]
        secs = statistics.fmean(c.points[-1][1] for c in mine)
        lines.append(f"{name:>12} " + " ".join(f"{e:>10.4f}" for e in expl) + f"  [{secs:.1f}s in all]")
    return "\n".join(lines)


def plot(results: dict[str, list[Curve]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 2, figsize=(11, 4.2 * len(results)), squeeze=False)
    for row, (game_name, curves) in enumerate(results.items()):
        for name in dict.fromkeys(c.solver for c in curves):
            mine = [c for c in curves if c.solver == name]
            k = min(len(c.points) for c in mine)
            nodes = [statistics.fmean(c.points[i][0] for c in mine) for i in range(k)]
            secs = [statistics.fmean(c.points[i][1] for c in mine) for i in range(k)]
            expl = [math.exp(statistics.fmean(math.log(c.points[i][2]) for c in mine)) for i in range(k)]
            style = "-" if "CFVFP" in name else "--"
            axes[row][0].loglog(nodes, expl, style, marker="o", ms=3, label=name)
            axes[row][1].loglog(secs, expl, style, marker="o", ms=3, label=name)
        axes[row][0].set_xlabel("nodes touched")
        axes[row][1].set_xlabel("CPU seconds (solver only)")
        for ax in axes[row]:
            ax.set_ylabel("exploitability")
            ax.set_title(game_name)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend()
    fig.suptitle("Monte Carlo CFVFP vs OpenSpiel MCCFR (geometric mean over seeds)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def run_mc(games: list[str], budgets: dict[str, int], seeds: int, plot_path: Path | None) -> None:
    from open_spiel.python import policy as policy_lib

    results: dict[str, list[Curve]] = {}
    for game_name in games:
        game = pyspiel.load_game(game_name)
        tabular = policy_lib.TabularPolicy(game)
        budget = budgets.get(game_name, MC_NODES.get(game_name, 100_000))
        curves = [mc_run(game, name, budget, seed, tabular) for seed in range(seeds) for name in SOLVERS]
        results[game_name] = curves
        print(mc_curves_table(game_name, curves))
        print(mc_report(game_name, curves, MC_TARGETS.get(game_name, [0.1])), flush=True)
    if plot_path is not None:
        plot(results, plot_path)
        print(f"\nplot: {plot_path}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["mc", "full"], default="mc")
    ap.add_argument("--games", default="kuhn_poker,leduc_poker")
    ap.add_argument("--seeds", type=int, default=2, help="mc: seeds per solver")
    ap.add_argument(
        "--nodes",
        default="",
        help="mc: node budgets, GAME=N,... or one N for every game (default: "
        + ", ".join(f"{g} {n:,}" for g, n in MC_NODES.items())
        + ")",
    )
    ap.add_argument("--plot", type=Path, default=None, help="mc: write the curves to this PNG")
    ap.add_argument("--iterations", default="100,1000,3000,10000", help="full: checkpoints, increasing")
    ap.add_argument("--xfp-max", type=int, default=1000, help="full: our XFP reading up to this many")
    args = ap.parse_args()
    games = [g.strip() for g in args.games.split(",") if g.strip()]
    if args.part == "mc":
        budgets: dict[str, int] = {}
        for item in filter(None, args.nodes.split(",")):
            if "=" in item:
                g, n = item.split("=", 1)
                budgets[g.strip()] = int(float(n))
            else:
                budgets.update({g: int(float(item)) for g in games})
        run_mc(games, budgets, args.seeds, args.plot)
        return
    marks = sorted(int(x) for x in args.iterations.split(","))
    for name in games:
        run(name, marks, args.xfp_max)


if __name__ == "__main__":
    main()
