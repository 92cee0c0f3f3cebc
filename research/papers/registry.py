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

from research.papers import coaching, cwm_paper, minimax_tot
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
    "wordnt": "not yet driven by `spielbus paper`; today: `spielbus run examples/wordnt.toml`",
}


def _not_yet(name: str) -> Paper:
    async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
        cell = Cell(name="all", title=f"{name}: every table", why=NOT_YET[name])
        write_cells(out, {"all": cell})
        return [cell]

    return Paper(tables={}, run=run)


PAPERS: dict[str, Paper] = {
    "minimax_tot": Paper(tables=minimax_tot.TABLES, run=minimax_tot.run),
    "cwm": Paper(tables=cwm_paper.TABLES, run=cwm_paper.run, extra=cwm_paper.extra),
    "coaching": Paper(tables=coaching.TABLES, run=coaching.run),
    **{name: _not_yet(name) for name in NOT_YET},
}
