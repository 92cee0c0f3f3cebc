"""Games an SPRT needs to decide, against a fixed-games run of the same confidence (issue 16).

    .venv/bin/python benchmarks/sprt_games.py [--file examples/sprt.toml] [--repeats 3]

For each repeat (tournament seed `seed + i`), two real runs through `spielbus.run.run_tournament`,
exactly as `spielbus run` (embedded nats-server, agents as processes, one referee worker):

1. the SPRT of the file (MCTS 400 against 200 simulations on connect four, H0 nElo elo0 against
   H1 nElo elo1, alpha, beta): the pairs it played until it accepted a hypothesis;
2. a fixed-games run of the same schedule (the same tournament seed, so the same pair seeds):
   the number of pairs a fixed-sample one-sided test needs for the same error rates,
   n = ((z_{1-alpha} + z_{1-beta}) / (t1 - t0))^2 with t = sqrt(2) nElo / (800 / ln 10) the
   normalized Elo per pair (it does not depend on the unknown variance: that is what normalized
   Elo is for), played whole (the bounds set out of reach); reported with its Elo estimate and
   the fixed test's verdict (z of the mean pair score against H0's).

Limits: the MCTS agents are unseeded (connect four has no chance and no opening set, so seeded
deterministic agents would play one game in every pair); the seeds the two runs share are the
schedule's, not the agents' moves, so the runs are paired in schedule only. A few repeats show
the spread of the SPRT's stopping time, not its expectation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import sys
import tempfile
import time
from pathlib import Path
from statistics import NormalDist
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from referee.config import TournamentConfig, load_config
from referee.sprt import NELO_SCALE
from spielbus.run import RunOptions, run_tournament

EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "sprt.toml")


def fixed_pairs(elo0: float, elo1: float, alpha: float, beta: float) -> int:
    z = NormalDist().inv_cdf
    t0, t1 = (math.sqrt(2.0) * e / NELO_SCALE for e in (elo0, elo1))
    return math.ceil(((z(1 - alpha) + z(1 - beta)) / (t1 - t0)) ** 2)


async def _play(config: TournamentConfig, run_dir: Path) -> tuple[dict[str, Any], float]:
    t0 = time.monotonic()
    result = await run_tournament(config, RunOptions(run_dir=str(run_dir), quiet=True), Console(quiet=True))
    summary = json.loads((result.path / "summary.json").read_text())
    return summary["sprt"], time.monotonic() - t0


def _fixed_verdict(sprt: dict[str, Any], elo0: float, alpha: float) -> tuple[float, bool]:
    """z of the normalized mean pair score against H0's, and whether it rejects H0 at alpha."""
    counts = sprt["pentanomial"]
    n = sum(counts)
    scores = (0.0, 0.25, 0.5, 0.75, 1.0)
    mu = sum(a * c for a, c in zip(scores, counts, strict=True)) / n
    sd = math.sqrt(sum(c * (a - mu) ** 2 for a, c in zip(scores, counts, strict=True)) / n)
    t0 = math.sqrt(2.0) * elo0 / NELO_SCALE
    z = ((mu - 0.5) / sd - t0) * math.sqrt(n) if sd > 0 else math.inf
    return z, z >= NormalDist().inv_cdf(1 - alpha)


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--file", default=EXAMPLE)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-fixed", action="store_true", help="only the SPRT runs")
    args = p.parse_args()
    base = load_config(args.file)
    cfg = base.sprt_config
    n_fixed = fixed_pairs(cfg.elo0, cfg.elo1, cfg.alpha, cfg.beta)
    print(
        f"{args.file}: {' vs '.join(base.agents)} on {base.games[0].label()}, H0 nElo {cfg.elo0:g}, "
        f"H1 nElo {cfg.elo1:g}, alpha {cfg.alpha:g}, beta {cfg.beta:g}; "
        f"fixed-sample test of the same errors: {n_fixed} pairs ({2 * n_fixed} games)"
    )
    sprt_games: list[int] = []
    with tempfile.TemporaryDirectory(prefix="sprt-bench-") as tmp:
        for i in range(args.repeats):
            seed = base.seed + i
            config = base.model_copy(update={"seed": seed})
            st, wall = await _play(config, Path(tmp))
            sprt_games.append(2 * int(st["pairs"]))
            e = st["estimate"]
            print(
                f"seed {seed}: SPRT {st['decision']} after {st['pairs']} pairs ({2 * st['pairs']} games), "
                f"LLR {st['llr']:.2f} ({st['lower']:.2f}, {st['upper']:.2f}), "
                f"pentanomial {st['pentanomial']}, "
                f"Elo {e['elo']:+.0f} [{e['elo_low']:+.0f}, {e['elo_high']:+.0f}], {wall:.0f} s",
                flush=True,
            )
            if args.no_fixed:
                continue
            # Same schedule seed, n_fixed pairs, bounds out of reach: a fixed-games run.
            fixed_sprt = cfg.model_copy(update={"alpha": 1e-300, "beta": 1e-300, "max_pairs": n_fixed})
            fst, fwall = await _play(config.model_copy(update={"sprt": fixed_sprt}), Path(tmp))
            z, rejects = _fixed_verdict(fst, cfg.elo0, cfg.alpha)
            fe = fst["estimate"]
            print(
                f"seed {seed}: fixed {fst['pairs']} pairs ({2 * fst['pairs']} games), pentanomial "
                f"{fst['pentanomial']}, Elo {fe['elo']:+.0f} [{fe['elo_low']:+.0f}, {fe['elo_high']:+.0f}], "
                f"z {z:.2f}: {'rejects' if rejects else 'keeps'} H0 at alpha {cfg.alpha:g}; "
                f"its SPRT LLR would be {fst['llr']:.1f}; {fwall:.0f} s",
                flush=True,
            )
    print(
        f"SPRT games to decide: {sprt_games} (mean {statistics.mean(sprt_games):.1f}) "
        f"against {2 * n_fixed} for the fixed-games test: "
        f"{statistics.mean(sprt_games) / (2 * n_fixed):.0%} of the games"
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
