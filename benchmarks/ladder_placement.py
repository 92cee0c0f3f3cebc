"""How many games place a newcomer on the ladder: matchmaking by information vs round robin vs random.

Simulated agents of known Bradley-Terry strength: an established field (Elo 1100..1900, evenly
spaced) that has already played `--history` games per pair, then a newcomer of strength
`--newcomer` joins. Every strategy plays one game at a time against the same truth (same seeds)
until the newcomer's 95% interval (Wald, from the same fit referee/ladder/matchmaking.py plans with) is
at most `--width` Elo wide, and reports the ladder games played since the newcomer joined (all
pairs count) and how many of them the newcomer played:

- info: referee/ladder/matchmaking.next_pairings over the whole pool (largest expected variance fall);
- round robin: every pair in turn, the newcomer's pairs spread through the cycle;
- random: a uniformly random pair each game.

Run: .venv/bin/python benchmarks/ladder_placement.py [--seeds 20] [--width 200]
Limits: two-player, no draws; the truth is exactly Bradley-Terry (real agents are not); the
stopping width is the Wald one, not the profile-likelihood interval the ladder reports.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from referee.ladder.matchmaking import fit, next_pairings, wald_halfwidth

Picker = Callable[[list[str], dict[tuple[str, str], float], int, np.random.Generator], tuple[str, str]]


def pick_info(
    agents: list[str], wins: dict[tuple[str, str], float], step: int, rng: np.random.Generator
) -> tuple[str, str]:
    p = next_pairings(agents, wins, {a: 1 for a in agents}, {}, 1)[0]
    return p.first, p.second


def pick_round_robin(
    agents: list[str], wins: dict[tuple[str, str], float], step: int, rng: np.random.Generator
) -> tuple[str, str]:
    pairs = list(itertools.combinations(agents, 2))
    return pairs[step % len(pairs)]


def pick_random(
    agents: list[str], wins: dict[tuple[str, str], float], step: int, rng: np.random.Generator
) -> tuple[str, str]:
    i, j = rng.choice(len(agents), size=2, replace=False)
    return agents[int(i)], agents[int(j)]


def play(truth: dict[str, float], a: str, b: str, rng: np.random.Generator) -> float:
    p = 1.0 / (1.0 + 10 ** ((truth[b] - truth[a]) / 400.0))
    return 1.0 if rng.random() < p else 0.0


def run(
    pick: Picker, field: int, history: int, newcomer: float, width: float, seed: int, cap: int
) -> tuple[int, int]:
    rng = np.random.default_rng(seed)
    truth = {f"a{i}": 1100.0 + 800.0 * i / max(field - 1, 1) for i in range(field)}
    wins: dict[tuple[str, str], float] = defaultdict(float)
    for a, b in itertools.combinations(list(truth), 2):
        for _ in range(history):
            s = play(truth, a, b, rng)
            wins[(a, b)] += s
            wins[(b, a)] += 1.0 - s
    truth["new"] = newcomer
    agents = list(truth)
    play_rng = np.random.default_rng(seed + 10_000)  # same game outcomes stream per strategy
    games = new_games = 0
    while games < cap:
        _, cov = fit(agents, wins)
        if 2 * wald_halfwidth(cov)[agents.index("new")] <= width:
            break
        a, b = pick(agents, wins, games, play_rng)
        s = play(truth, a, b, play_rng)
        wins[(a, b)] += s
        wins[(b, a)] += 1.0 - s
        games += 1
        new_games += "new" in (a, b)
    return games, new_games


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--field", type=int, default=8)
    ap.add_argument("--history", type=int, default=4, help="games per established pair before the newcomer")
    ap.add_argument("--newcomer", type=float, default=1650.0)
    ap.add_argument("--width", type=float, default=200.0, help="target 95%% interval width, Elo")
    ap.add_argument("--cap", type=int, default=3000)
    args = ap.parse_args()
    print(
        f"field {args.field} + newcomer {args.newcomer:.0f}, history {args.history}/pair,"
        f" width {args.width:.0f} Elo, {args.seeds} seeds"
    )
    for name, pick in (("info", pick_info), ("round robin", pick_round_robin), ("random", pick_random)):
        res = [
            run(pick, args.field, args.history, args.newcomer, args.width, s, args.cap)
            for s in range(args.seeds)
        ]
        total = [r[0] for r in res]
        new = [r[1] for r in res]
        print(
            f"{name:12s} ladder games median {statistics.median(total):6.0f}"
            f" (min {min(total)}, max {max(total)})"
            f"   newcomer's games median {statistics.median(new):5.0f}"
        )


if __name__ == "__main__":
    main()
