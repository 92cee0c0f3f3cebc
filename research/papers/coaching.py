"""LLM Coaching LLM in Self-Play Training (docs/papers.md section 5), Table 1, for
`spielbus paper coaching [table1]`: the harness around `research.coach.table1.table1` (the
`spielbus selfplay table1` command), which distils the CFVFP references and the coach's policies of
one coached dataset into the embedded SmolLM2 (GRPO), then plays base, both distilled models and a
CFVFP table through the real referee and rates them.

Cells: per agent its Elo as the paper computes it (appendix B.2: K = 0.2, the Brownian win
probability) and its Bradley-Terry rating with the 95% interval, the paper's Elo beside the two
distilled models (Table 1). The dataset is `examples/coach/data` (tiny-deck Hold'em, coached).
quick: 1 GRPO step of 1 prompt x 2 answers per model and 1 match per pairing and seat order (the
smallest run that goes through every stage); paper: the paper's 50 steps of 128 samples, i.e. 128
prompts (CFVFP nodes) a step, 6,400 nodes in all ("50 training steps, with 128 samples per step,
corresponding to 6,400 CFVFP nodes"), each with a GRPO group of 4 answers (the paper gives no group
size), and 1,000 matches per pairing and seat order.

Why 1,000 matches: with the paper's K = 0.2 an Elo is 1500 + 0.2 * sum(S - E) over the agent's
matches, so one match moves it at most 0.2 points and 60 matches at most 12: the paper's 1549 is out
of reach by construction. The paper does not give its rating games; its ratings come from a large
field played many times. For a 49-point edge (E = 0.57) the gap between two agents closes with a
time constant of 1 / (2 * 0.2 * ln 10 / 1600), about 1,700 matches of the pair, so four agents need
about 1,000 matches per pairing and seat order (6,000 per agent) for their Elo to show the paper's
spread: simulated with the paper's ratings as the true strengths, it lands within the paper's +-32
(tests/test_paper_cwm_coaching.py). The Elo cells carry a 95% bootstrap interval over the matches
(research.coach.table1.elo_intervals), as the paper's +-.

Limits: it needs the `train` extra (torch, TRL, PEFT); without it every cell says so with the
install command. `--llm` does not apply: Table 1 trains weights, here the embedded model's.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
from pathlib import Path
from typing import Any

from rich.console import Console

from bus.protocol import MatchRecord
from research.papers.cells import Cell, cells_of, played_title, read_cells, write_cells
from research.papers.decided import seat_shares
from research.papers.numbers import paper_numbers

AGENTS = ("coach_distilled", "cfvfp_distilled", "base", "cfvfp_table")
TABLES = {"table1": [f"{a}-{r}" for a in AGENTS for r in ("elo", "bt")]}
DATA = Path(__file__).resolve().parents[2] / "examples" / "coach" / "data"
TRAIN_MODULES = ("torch", "transformers", "trl", "peft", "gguf", "datasets", "accelerate")
INSTALL = "pip install torch==2.13.0 && pip install -e '.[train]' (or `make train-deps`)"
# (steps, prompts, group, games per pairing and seat order)
SIZES = {"quick": (1, 1, 2, 1), "paper": (50, 128, 4, 1000)}


def missing_train_extra() -> list[str]:
    """The `train` extra's modules that are not installed."""
    return [m for m in TRAIN_MODULES if importlib.util.find_spec(m) is None]


def cells_from(result: dict[str, Any], out: Path, names: list[str]) -> list[Cell]:
    """Table 1's cells from a `table1` result (its ratings and its run folder)."""
    numbers = paper_numbers("coaching")
    ratings = {r["agent"]: r for r in result["ratings"]}
    run = str(Path(result["run"]).resolve().relative_to(out.resolve()))
    matches = Path(result["run"]) / "matches.jsonl"
    lines = matches.read_text().splitlines() if matches.exists() else []
    seats = {s.agent: s for s in seat_shares(MatchRecord.model_validate_json(x) for x in lines if x.strip())}
    cells = []
    for name in names:
        agent, _, kind = name.partition("-")
        rating = "Elo" if kind == "elo" else "Bradley-Terry"
        title = numbers[name].title if name in numbers else f"{agent}: {rating}"
        r = ratings.get(agent)
        common: dict[str, Any] = {"name": name, "title": title, "agent": agent, "run": run, "unit": "elo"}
        common.update(model="smollm2 (embedded) and its distilled copies", seed=0, policy="random")
        common["seats"] = [seats[agent]] if agent in seats else []
        common["title"] = played_title(title, common["seats"])  # the model that played
        if r is None:
            cells.append(Cell(**common, why=f"{agent} has no rating in the run"))
        elif kind == "elo":
            low, high = r.get("elo_low"), r.get("elo_high")
            if low is not None and high is not None:  # a table1.json of before the Elo interval: none
                common.update(low=float(low), high=float(high))
            cells.append(Cell(**common, score=float(r["elo"]), games=int(result["matches"])))
        else:
            score, low, high = float(r["bt"]), float(r["bt_low"]), float(r["bt_high"])
            cells.append(Cell(**common, score=score, low=low, high=high, games=int(result["matches"])))
    return cells


async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
    """Table 1 by `research.coach.table1` into `out/table1/`, as cells (resumable as table1 is)."""
    names = cells_of("coaching", TABLES, args.table, getattr(args, "cells", None))
    done = read_cells(out) if args.resume else {}
    if names and all(n in done and done[n].score is not None for n in names):
        return [done[n] for n in names]
    missing = missing_train_extra()
    if missing:
        why = f"needs the train extra ({', '.join(missing)} missing): {INSTALL}"
        missing_cells = {n: Cell(name=n, title=n, why=why) for n in names}
        write_cells(out, {**done, **missing_cells})
        return list(missing_cells.values())
    from research.coach.table1 import table1
    from research.coach.train import TrainSettings

    steps, prompts, group, per_order = SIZES[args.scale]
    if args.games:
        per_order = min(per_order, args.games)
    settings = TrainSettings(steps=steps, prompts=prompts, group=group, save_every=max(1, min(10, steps)))
    console.print(f"coaching: table1 on {DATA} ({steps} GRPO steps of {prompts}x{group} per model)")
    result = await asyncio.to_thread(
        table1, DATA, out / "table1", settings, games_per_pairing=per_order, progress=False
    )
    cells = cells_from(result, out, names)
    write_cells(out, {**done, **{c.name: c for c in cells}})
    return cells
