"""`spielbus paper NAME [TABLE] [--llm SPEC] [--scale quick|paper] [--out DIR] [--resume]`.

Runs a paper's measurable cells (each a tournament through the real referee), writes the report
folder (report.md, cells.json, plots, runs/) and prints the table and the report's path.
Limits: Minimax Tree of Thoughts is measured; the other papers' cells say why not yet and which
command measures them today.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from referee.config import ConfigError
from research.papers import minimax_tot
from research.papers.cells import Cell, measure, read_cells, write_cells
from research.papers.numbers import paper_numbers
from research.papers.report import plot_win_rates, table_rows, write_markdown

PAPERS = ["minimax_tot", "llm_mcts", "cwm", "wordnt", "coaching"]

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


def llm_section(spec: str | None, model: str) -> dict[str, Any]:
    """`--llm`: none (the embedded model, started by the run), an OpenAI-compatible URL, or `ollama:URL`."""
    if not spec:
        return {"backend": "openai", "model": model}
    if spec.startswith("ollama:"):
        return {"backend": "ollama", "base_url": spec.removeprefix("ollama:"), "model": model}
    if spec.startswith(("http://", "https://")):
        return {"backend": "openai", "base_url": spec, "model": model}
    raise ConfigError(f"--llm {spec!r}: give an OpenAI-compatible URL (http...) or ollama:URL")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus paper", description=__doc__.split("\n\n")[0])
    p.add_argument("name", choices=PAPERS, help="the paper (docs/papers.md)")
    p.add_argument("table", nargs="?", default=None, help="one table (minimax_tot: table1); default all")
    p.add_argument(
        "--llm", default=None, help="OpenAI-compatible URL or ollama:URL (default: the embedded model)"
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
    return p


async def _minimax_tot(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
    llm = llm_section(args.llm, args.model)
    done = read_cells(out) if args.resume else {}
    names = minimax_tot.TABLES.get(args.table or "table1")
    if names is None:
        raise ConfigError(f"minimax_tot has tables {sorted(minimax_tot.TABLES)}, not {args.table!r}")
    numbers = paper_numbers("minimax_tot")
    for name in names:
        if name in done and done[name].score is not None:
            continue
        cfg = minimax_tot.config(name, args.scale, llm, args.games)
        done[name] = await measure(
            out, name, numbers[name].title, cfg, "minimax_tot", "tot", llm["model"], args.resume, console
        )
        write_cells(out, done)  # after every cell, so that --resume keeps it
    return [done[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    out = Path(args.out or f"reports/{args.name}-{args.scale}")
    out.mkdir(parents=True, exist_ok=True)
    try:
        if args.name == "minimax_tot":
            cells = asyncio.run(_minimax_tot(args, out, console))
        else:
            cells = [Cell(name="all", title=f"{args.name}: every table", why=NOT_YET[args.name])]
            write_cells(out, {"all": cells[0]})
    except ConfigError as exc:
        console.print(f"[red]{exc}[/red]")
        return 2
    numbers = paper_numbers(args.name)
    plot_win_rates(out, cells, numbers)
    path = write_markdown(out, args.name, cells, numbers, args.scale)
    table = Table(title=f"{args.name} ({args.scale})")
    for col in ("cell", "paper", "ours", "run folder"):
        table.add_column(col)
    for row in table_rows(cells, numbers):
        table.add_row(*row)
    console.print(table)
    console.print(f"report: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
