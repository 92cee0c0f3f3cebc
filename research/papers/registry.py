"""The papers `spielbus paper` knows: each one a module with its TABLES and an async runner.

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

from research.papers import coaching, cwm_paper, llm_mcts, llm_mcts_report, minimax_tot, wordnt
from research.papers.cells import Cell

Runner = Callable[[argparse.Namespace, Path, Console], Coroutine[Any, Any, list[Cell]]]
Extra = Callable[[Path, list[Cell]], list[str]]


@dataclass(frozen=True)
class Paper:
    """One paper's tables (table name -> its cell names) and the runner that measures them."""

    tables: Mapping[str, Sequence[str]]
    run: Runner
    extra: Extra | None = None
    win_rate_plot: bool = True  # the generic chart of every share cell; off when `extra` draws its own


# In the order of docs/papers.md.
PAPERS: dict[str, Paper] = {
    "minimax_tot": Paper(tables=minimax_tot.TABLES, run=minimax_tot.run),
    "llm_mcts": Paper(
        tables=llm_mcts.TABLES, run=llm_mcts.run, extra=llm_mcts_report.extra, win_rate_plot=False
    ),
    "cwm": Paper(tables=cwm_paper.TABLES, run=cwm_paper.run, extra=cwm_paper.extra),
    "wordnt": Paper(tables=wordnt.TABLES, run=wordnt.run, extra=wordnt.extra, win_rate_plot=False),
    "coaching": Paper(tables=coaching.TABLES, run=coaching.run),
}
