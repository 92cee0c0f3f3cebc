"""Median time of one careful Wordn't bot decision: indexed vs naive scan, same run.

    .venv/bin/python benchmarks/wordnt_decision.py [--players 6] [--positions 40] [--scan-positions 6]

Positions are the strings the careful bot actually meets: several rounds of
careful bots playing each other on the full Scrabble-like list (`scowl70`,
min_word_length 4), every decision recorded. The indexed decision
(`IndexProvider`, suffix array + numpy) is timed on every position, uncached;
the baseline (`ScanProvider`: for each proposal string, mine and the next
player's, scan the whole word list with `s in w`) is timed on an evenly spaced
subset of the same positions (those where the answer is not "challenge word",
which is one set lookup for both), and both must reach the same scores. The ratio
compares medians on that common subset.

Limits: one process, wall-clock `perf_counter`; the index build (once per
process) is reported apart, not in the per-decision times; the empty string
(first move of a round) is the slowest indexed case and is in the sample only
as often as play meets it.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.wordnt.analysis import Provider, analyse, choose
from agents.wordnt.index import get_index
from agents.wordnt.providers import IndexProvider, ScanProvider
from games.word.wordnt import CHALLENGE_WORD, apply_letter


def collect_positions(
    ix_provider_factory: Callable[[], Provider], n: int, count: int, seed: int
) -> list[str]:
    """Strings met by careful bots playing rounds against each other."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < count:
        c = ""
        while True:
            out.append(c)
            an = analyse(ix_provider_factory(), c, n, False, 0.01)
            a, _ = choose(an, rng)
            if a >= CHALLENGE_WORD:
                break
            c = apply_letter(c, a)
    return out[:count]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--players", type=int, default=6)
    ap.add_argument("--positions", type=int, default=40)
    ap.add_argument("--scan-positions", type=int, default=6)
    ap.add_argument("--words", default="scowl70")
    ap.add_argument("--min-word-length", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    t0 = time.perf_counter()
    ix = get_index(args.words, args.min_word_length)
    ix.occurrences("a")  # builds the suffix array
    build = time.perf_counter() - t0
    ix.tables(args.players)
    print(f"index: {ix.n_words} words, built in {build:.1f} s (once per process)")

    positions = collect_positions(lambda: IndexProvider(ix), args.players, args.positions, args.seed)
    idx_times: dict[int, float] = {}
    results = {}
    for i, c in enumerate(positions):
        t = time.perf_counter()
        results[i] = analyse(IndexProvider(ix), c, args.players, False, 0.01)
        idx_times[i] = time.perf_counter() - t
    lengths = [len(c) for c in positions]
    print(
        f"positions: {len(positions)} (string lengths {min(lengths)}..{max(lengths)}, "
        f"median {statistics.median(lengths)}), {args.players} players, careful bot"
    )
    print(
        f"indexed: median {statistics.median(idx_times.values()) * 1e3:.2f} ms, "
        f"max {max(idx_times.values()) * 1e3:.1f} ms over all positions"
    )
    # Challenging a word is a set lookup for both methods; compare where there is work to do.
    work = [i for i in idx_times if results[i].scenario != "challenge_word"]
    print(
        f"indexed, {len(work)} positions that are not 'challenge word': median "
        f"{statistics.median(idx_times[i] for i in work) * 1e3:.2f} ms"
    )

    scan = ScanProvider(ix.words)
    # Distinct strings only: careful bots meet the empty string at every round's start, and a
    # subset drawn from the raw list would be mostly that one (cached, slowest) case.
    distinct = list({positions[i]: i for i in work}.values())
    step = max(1, len(distinct) // max(1, args.scan_positions))
    subset = distinct[::step][: args.scan_positions]
    scan_times: list[float] = []
    for i in subset:
        t = time.perf_counter()
        an = analyse(scan, positions[i], args.players, False, 0.01)
        scan_times.append(time.perf_counter() - t)
        same = (
            an.scenario == results[i].scenario
            and an.scores.keys() == results[i].scores.keys()
            and all(abs(v - results[i].scores[k]) < 1e-9 for k, v in an.scores.items())
        )
        if not same:
            print(f"MISMATCH on {positions[i]!r}", file=sys.stderr)
            return 1
        print(
            f"  {positions[i]!r:>12}: scan {scan_times[-1] * 1e3:9.1f} ms, "
            f"index {idx_times[i] * 1e3:7.2f} ms, {an.scenario}"
        )
    med_idx = statistics.median(idx_times[i] for i in subset)
    med_scan = statistics.median(scan_times)
    print(
        f"common subset ({len(subset)} positions): index median {med_idx * 1e3:.2f} ms, "
        f"scan median {med_scan * 1e3:.1f} ms"
    )
    print(f"ratio (scan / index): {med_scan / med_idx:.0f}x")
    if "" in positions:
        # The round's opening position: analysed once per word list and player count, then cached
        # by the agent (it warms it at match start), so it is reported apart from the median.
        i = positions.index("")
        t = time.perf_counter()
        analyse(scan, "", args.players, False, 0.01)
        print(
            f"empty string (round opening, cached by the agent): index {idx_times[i] * 1e3:.0f} ms, "
            f"scan {(time.perf_counter() - t) * 1e3:.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
