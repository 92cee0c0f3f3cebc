"""`spielbus paper NAME [TABLE] [--llm SPEC] [--scale quick|paper] [--out DIR] [--resume]`.

Runs a paper's measurable cells (each a tournament through the real referee), writes the report
folder (report.md, cells.json, plots, runs/) and prints the table and the report's path.
Limits: the papers and their runners are listed in research/papers/registry.py; a paper not driven
yet prints a cell that says why and which command measures it today.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from referee.config import ConfigError
from research.papers.numbers import paper_numbers
from research.papers.registry import PAPERS
from research.papers.report import COLUMNS, plot_win_rates, table_rows, write_markdown


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus paper", description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=list(PAPERS), help="the paper (docs/papers.md)")
    tables = "; ".join(f"{n}: {', '.join(paper.tables)}" for n, paper in PAPERS.items() if paper.tables)
    p.add_argument("table", nargs="?", default=None, help=f"one table ({tables}); default all")
    p.add_argument(
        "--llm",
        default=None,
        help="an OpenAI-compatible URL, ollama:URL, or NAME of an [llm.NAME] section of --llm-config "
        "(default: the embedded model)",
    )
    p.add_argument(
        "--llm-config", default=None, metavar="FILE", help="a tournament file whose [llm.NAME] --llm names"
    )
    p.add_argument("--model", default="smollm2", help="the model name to ask the server for")
    p.add_argument(
        "--scale",
        choices=["quick", "paper"],
        default="quick",
        help="quick: minutes; paper: the paper's sizes",
    )
    p.add_argument("--out", default=None, help="report folder (default: reports/NAME-SCALE)")
    p.add_argument("--resume", action="store_true", help="keep finished cells, continue an interrupted one")
    p.add_argument("--games", type=int, default=None, help="cap the games per seat order (smoke tests)")
    p.add_argument("--rounds", type=int, default=None, help="cap the rounds per match (wordnt; smoke tests)")
    p.add_argument("--cells", default=None, help="only these cells of the table (comma-separated names)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    out = Path(args.out or f"reports/{args.name}-{args.scale}")
    out.mkdir(parents=True, exist_ok=True)
    paper = PAPERS[args.name]
    try:
        cells = asyncio.run(paper.run(args, out, console))
    except ConfigError as exc:
        console.print(f"[red]{escape(str(exc))}[/red]")  # an error may name [llm.NAME]: not markup
        return 2
    numbers = paper_numbers(args.name)
    if paper.win_rate_plot:
        plot_win_rates(out, cells, numbers)
    extra = paper.extra(out, cells) if paper.extra else []
    path = write_markdown(out, args.name, cells, numbers, args.scale, extra)
    table = Table(title=f"{args.name} ({args.scale})")
    for col in COLUMNS:
        table.add_column(col)
    for row in table_rows(cells, numbers):
        table.add_row(*(escape(x) for x in row))  # an agent's note or a title may hold [brackets]
    console.print(table)
    console.print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
