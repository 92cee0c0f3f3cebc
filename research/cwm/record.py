"""Record trajectories for code-world-model synthesis: `random` against `random` through the real
referee (embedded NATS), written as a run folder whose `matches.jsonl` `research.cwm.trajectories`
replays.

It runs a whole tournament (`spielbus.run.run_tournament`, with its own event loop, embedded
NATS and signal handling), so `spielbus cwm synthesize` (research/cwm/cli.py) runs it as its own
process:
`python -m research.cwm.record GAME --count N --seed S --run-dir DIR` (prints the run folder).
Limits: two-seat pairing only (`random_a` vs `random_b`), a 5 s move deadline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from rich.console import Console

from games.loader import GameSpecError, parse_spec
from referee.config import ConfigError, parse_config
from spielbus.run import RunOptions, run_tournament


def record(game: str, count: int, seed: int, run_dir: str) -> Path:
    """Play `count` (rounded up to even) matches of `random` vs `random`; returns the run folder.
    `game` is a game spec: a name, or a name with parameters (`mnk(m=6,n=6,k=4)`)."""
    spec = parse_spec(game)
    params = ", ".join(f"{json.dumps(k)} = {json.dumps(v)}" for k, v in spec.params.items())
    per_pairing = max(1, (count + 1) // 2)
    toml = f"""
name = "cwm_trajectories"
games_per_pairing = {per_pairing}
concurrency = 2
deadline_ms = 5000
seed = {seed}
run_dir = {json.dumps(run_dir)}
[[games]]
name = {json.dumps(spec.name)}
params = {{ {params} }}
[agents.random_a]
kind = "random"
options = {{ seed = {seed} }}
[agents.random_b]
kind = "random"
options = {{ seed = {seed + 1} }}
"""
    config = parse_config(toml, "<cwm trajectories>")
    result = asyncio.run(run_tournament(config, RunOptions(run_dir=run_dir, quiet=True), Console(quiet=True)))
    return result.path


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        prog="python -m research.cwm.record",
        description="Record random-vs-random matches of GAME through the referee; prints the run folder.",
    )
    p.add_argument("game")
    p.add_argument("--count", type=int, required=True, help="matches (at least 1)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-dir", required=True, help="folder the run folder is made in")
    args = p.parse_args(argv)
    if args.count < 1:
        p.error("--count must be at least 1")
    try:
        folder = record(args.game, args.count, args.seed, args.run_dir)
    except (ConfigError, GameSpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(folder)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
