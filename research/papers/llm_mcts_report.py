"""The LLM-MCTS report's own sections: Table 2 as depth by method with its solve-rate-by-depth plot,
Table 3 as one row of methods, Table 5 as the paper prints it (methods as rows, Stockfish levels as
columns, not standings), each cell "paper / ours", and a win-rate chart of Table 5.

Limits: only the tables whose cells the run measured or listed; plots need matplotlib (`papers` extra).
"""

from __future__ import annotations

from pathlib import Path

from research.papers.cells import Cell
from research.papers.llm_mcts import DEPTHS, LEVELS, PAPER, T2_METHODS, T3_METHODS, T5_METHODS
from research.papers.numbers import PaperNumber, paper_numbers
from research.papers.report import fmt, plot_win_rates

METHOD_NAMES = {
    "llm_vote": "LLM (vote)",
    "mcts50": "MCTS (50)",
    "mcts10000": "MCTS (10,000)",
    "llm_mcts": "LLM + MCTS",
    "mcts": "MCTS",
}


def _pair(name: str, cells: dict[str, Cell], numbers: dict[str, PaperNumber]) -> str:
    """ "paper / ours (k of n)" for one cell; ours is "-" with the reason's first words when unmeasured."""
    paper = fmt(numbers[name].value, numbers[name].unit) if name in numbers else "?"
    c = cells.get(name)
    if c is None:
        return f"{paper} / (not in this report)"
    if c.score is None:
        return f"{paper} / - ({c.why.split(':')[0]})"
    count = f"{c.wins}/{c.games}" if c.unit == "share" else f"{c.games} games"
    return f"{paper} / {fmt(c.score, c.unit)} ({count})"


def _matrix(title: str, corner: str, rows: list[tuple[str, list[str]]], cols: list[str]) -> list[str]:
    lines = [f"### {title}", "", f"| {corner} | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    return lines + [f"| {label} | " + " | ".join(cells) + " |" for label, cells in rows] + [""]


def plot_solve_rates(out: Path, cells: dict[str, Cell], numbers: dict[str, PaperNumber]) -> list[Path]:
    """Table 2: solve rate by depth, ours (solid, 95% intervals) and the paper's (dashed), per method."""
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for i, m in enumerate(T2_METHODS):
        colour = f"C{i}"
        paper = [(d, numbers[f"t2-d{d}-{m}"].value) for d in DEPTHS if f"t2-d{d}-{m}" in numbers]
        ax.plot([d for d, _ in paper], [v for _, v in paper], ls="--", color=colour, alpha=0.6)
        ours = [cells[n] for d in DEPTHS if (n := f"t2-d{d}-{m}") in cells and cells[n].score is not None]
        if ours:
            # Offset per method so that equal points (e.g. all 0 of 1) do not hide each other.
            xs = [int(c.name.split("-")[1][1:]) + 0.07 * (i - 1.5) for c in ours]
            ys = [c.score or 0.0 for c in ours]
            errs = [[y - (c.low or 0.0) for y, c in zip(ys, ours, strict=True)],
                    [(c.high or 0.0) - y for y, c in zip(ys, ours, strict=True)]]  # fmt: skip
            ax.errorbar(xs, ys, yerr=errs, marker="o", capsize=3, color=colour, label=f"{METHOD_NAMES[m]}")
        else:
            ax.plot([], [], color=colour, label=f"{METHOD_NAMES[m]} (not run)")
    ax.plot([], [], ls="--", color="grey", label="paper (dashed)")
    ax.set_xlabel("puzzle depth (mate in N)")
    ax.set_ylabel("solved")
    ax.set_ylim(-0.02, 1.02)
    ax.set_xticks(list(DEPTHS))
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    paths = [out / "table2_solve_rate.png", out / "table2_solve_rate.svg"]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return paths


def extra(out: Path, cells: list[Cell]) -> list[str]:
    """report.md's LLM-MCTS sections (and their plots) for the tables among `cells`."""
    numbers = paper_numbers(PAPER)
    by = {c.name: c for c in cells}
    lines = ["## The paper's tables, paper / ours", ""]
    if any(n.startswith("t2-") for n in by):
        rows = [(str(d), [_pair(f"t2-d{d}-{m}", by, numbers) for m in T2_METHODS]) for d in DEPTHS]
        cols = [METHOD_NAMES[m] for m in T2_METHODS]
        lines += _matrix("Table 2: mate-in-N puzzles solved", "depth", rows, cols)
        plot_solve_rates(out, by, numbers)
        lines += ["![Table 2: solve rate by depth](table2_solve_rate.png)", ""]
    if any(n.startswith("t3-") for n in by):
        rows = [("mean territory, black", [_pair(f"t3-{m}", by, numbers) for m in T3_METHODS])]
        cols = [METHOD_NAMES[m] for m in T3_METHODS]
        lines += _matrix("Table 3: MiniGo against MCTS (1,000)", "", rows, cols)
        notes = {c.note.split(";")[0] for n, c in by.items() if n.startswith("t3-") and c.note}
        lines += [f"Score used: {n}." for n in sorted(notes)] + [""]
    if any(n.startswith("t5-") for n in by):
        rows = [(METHOD_NAMES[m], [_pair(f"t5-l{lv}-{m}", by, numbers) for lv in LEVELS]) for m in T5_METHODS]
        lines += _matrix("Table 5: score against Stockfish (win 1, draw 0.5, loss 0)", "method", rows,
                         [f"level {lv}" for lv in LEVELS])  # fmt: skip
        if plot_win_rates(out, [by[n] for n in by if n.startswith("t5-")], numbers, stem="table5_scores"):
            lines += ["![Table 5: scores against Stockfish](table5_scores.png)", ""]
    return lines
