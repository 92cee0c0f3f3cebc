"""The papers `spielbus paper` knows: each one a module with its TABLES and an async runner, or a
cell that says why it is not driven yet (and which command measures it today).

A paper's runner is `async def run(args, out, console) -> list[Cell]`; it may also give `extra`, a
function that writes its own plots into the report folder and returns Markdown lines for report.md
(figures beyond the generic win-rate chart, e.g. a level-by-method table).

Limits: the cell names of every table are listed up front so that `TABLE` is checked before any run.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from research.papers import minimax_tot
from research.papers.cells import Cell, write_cells

Runner = Callable[[argparse.Namespace, Path, Console], Coroutine[Any, Any, list[Cell]]]
Extra = Callable[[Path, list[Cell]], list[str]]


@dataclass(frozen=True)
class Paper:
    """One paper's tables (table name -> its cell names) and the runner that measures them."""

    tables: Mapping[str, Sequence[str]]
    run: Runner
    extra: Extra | None = None


# Papers whose tables `spielbus paper` does not run yet: the reason and today's command.
NOT_YET = {
    "llm_mcts": "not yet driven by `spielbus paper`; today: `spielbus puzzles` (Table 2), "
    "`spielbus run examples/minigo.toml` (Table 3), "
    "`spielbus run examples/chess_vs_stockfish.toml` (Table 5)",
    "cwm": "not yet driven by `spielbus paper`; needs a model that writes code (the embedded 135M model "
    "cannot); today: `spielbus cwm synthesize` then `spielbus cwm eval DIR` (Table 1), "
    "`spielbus run examples/cwm.toml` (Figures 2-3)",
    "wordnt": "not yet driven by `spielbus paper`; today: `spielbus run examples/wordnt.toml`",
    "coaching": "needs the train extra and research.coach's Table 1 command (docs/coach.md); "
    "not yet driven by `spielbus paper`",
}


def _not_yet(name: str) -> Paper:
    async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
        cell = Cell(name="all", title=f"{name}: every table", why=NOT_YET[name])
        write_cells(out, {"all": cell})
        return [cell]

    return Paper(tables={}, run=run)


PAPERS: dict[str, Paper] = {
    "minimax_tot": Paper(tables=minimax_tot.TABLES, run=minimax_tot.run),
    **{name: _not_yet(name) for name in NOT_YET},
}
