"""A process's start-up CPU: importing what an agent, the referee worker and the command line load,
with nats.py's aiohttp left out until a ws:// URL needs it (bus/nats_import.py) against the same
imports with aiohttp loaded first, as nats.py did on its own (the baseline, in the same run).

Each sample is a fresh `python -c` that imports the modules and prints its own CPU time
(`time.process_time`, so a loaded machine's waits are not counted, only its slower cores); the
median of `--rounds` samples per row. Every test that starts an agent process pays this, and so
does every `spielbus run`, once per agent.

    .venv/bin/python benchmarks/startup_cpu.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

ROWS = {
    "agent process (agents.cli)": "agents.cli",
    "referee worker (referee.worker)": "referee.worker",
    "command line (spielbus.cli)": "spielbus.cli",
}


def _cpu_s(module: str, aiohttp_first: bool) -> float:
    first = "import aiohttp; " if aiohttp_first else ""
    code = f"import time; {first}import {module}; print(time.process_time())"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True, timeout=300
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    print(f"{'process':34} {'with aiohttp':>13} {'without':>9} {'ratio':>6}")
    for label, module in ROWS.items():
        base = statistics.median(_cpu_s(module, True) for _ in range(args.rounds))
        lean = statistics.median(_cpu_s(module, False) for _ in range(args.rounds))
        print(f"{label:34} {base:12.3f}s {lean:8.3f}s {base / lean:5.2f}x")


if __name__ == "__main__":
    main()
