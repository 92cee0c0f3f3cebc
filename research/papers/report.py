"""A paper report's Markdown (the paper's numbers beside ours, the run folder behind each cell) and
its plot (win rates with 95% intervals, the paper's value marked), PNG and SVG by matplotlib.

Limits: one bar chart per report, of the score-share cells; a cell without a number is listed with
its reason, not plotted. Numbers print in their unit (research/papers/numbers.py): shares and
accuracies as percentages, LLM calls and payoffs as numbers, Elo as a rating with the paper's +-.
Every played cell's row also gives each seat's share of turns its own method did not decide
(research/papers/decided.py): a number says little about a method whose turns were not its own.
"""

from __future__ import annotations

from pathlib import Path

from research.papers.cells import Cell
from research.papers.decided import shares_text
from research.papers.numbers import PaperNumber, Unit


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def fmt(x: float | None, unit: Unit) -> str:
    """One number in its unit."""
    if x is None:
        return "-"
    if unit == "points":
        return f"{x:+.1f}"
    if unit in ("share", "accuracy", "rounds"):
        return f"{100 * x:.1f}%" if unit == "accuracy" else _pct(x)
    if unit == "elo":
        return f"{x:.0f}"
    return f"{x:.1f}" if unit == "calls" else f"{x:+.3f}"


def paper_text(n: PaperNumber) -> str:
    return fmt(n.value, n.unit) + (f" ± {n.plus_minus:g}" if n.plus_minus is not None else "")


def ours_text(c: Cell) -> str:
    """Our number with its interval and what it counts; an unmeasured cell's reason."""
    if c.score is None:
        return f"not measured: {c.why}"
    interval = f" [{fmt(c.low, c.unit)}, {fmt(c.high, c.unit)}]" if c.low is not None else ""
    of = {
        "share": "games",
        "payoff": "games",
        "accuracy": "test cases",
        "calls": "syntheses",
        "elo": "matches in the run",
        "points": "games",
        "rounds": "rounds",
    }[c.unit]
    return f"{fmt(c.score, c.unit)}{interval} of {c.games} {of}" + quality_text(c)


def quality_text(c: Cell) -> str:
    """The agent's move quality (docs/analysis.md), when its run was analysed."""
    mine = [q for q in c.quality if q.agent == c.agent]
    return "".join(
        f"; {q.game} ({q.reference}): accuracy {q.accuracy.value:.1f}% [{q.accuracy.lo:.1f}, "
        f"{q.accuracy.hi:.1f}], blunders/100 {q.blunders_per_100.value:.1f} "
        f"[{q.blunders_per_100.lo:.1f}, {q.blunders_per_100.hi:.1f}] over {q.moves} moves"
        for q in mine
    )


COLUMNS = ("cell", "paper", "ours", "run folder", "turns not decided by each seat's own method")


def table_rows(cells: list[Cell], numbers: dict[str, PaperNumber]) -> list[tuple[str, str, str, str, str]]:
    """(cell, paper, ours, source run, seats' shares) per cell; an unmeasured cell's `ours` is its
    reason."""
    rows = []
    for c in cells:
        paper = paper_text(numbers[c.name]) if c.name in numbers else "not reported"
        rows.append((c.title, paper, ours_text(c), c.run or "-", shares_text(c.seats)))
    return rows


def write_markdown(
    out: Path,
    paper: str,
    cells: list[Cell],
    numbers: dict[str, PaperNumber],
    scale: str,
    extra: list[str] | None = None,
) -> Path:
    """report.md: the side-by-side table, each cell's sources and settings, then the paper's `extra`."""
    lines = [
        f"# {paper}: the paper's numbers beside ours ({scale} scale)",
        "",
        "| cell | paper | ours (95% interval) | run folder | turns not decided by each seat's own method |",
        "|---|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | `{d}` | {e} |" for a, b, c, d, e in table_rows(cells, numbers)]
    lines += ["", "## Sources and settings", ""]
    for c in cells:
        if c.name in numbers:
            lines.append(f"- {c.title}: paper's number from {numbers[c.name].source}.")
        if c.note:
            lines.append(f"- {c.title}: {c.note.rstrip('.')}.")
        if c.score is not None and c.unit in ("share", "payoff", "points", "rounds"):
            counted = (
                f"{c.wins} wins and {c.draws} draws in {c.games} games (a draw counts half)"
                if c.unit in ("share", "payoff")
                else f"over {c.games} {'rounds' if c.unit == 'rounds' else 'games'}"
            )
            lines.append(
                f"- {c.title}: ours is {c.agent} against {c.opponent}, {counted}; model `{c.model}`, "
                f"tournament seed {c.seed}, fault policy `{c.policy}`; {shares_text(c.seats)}."
            )
    if any(c.score is not None and c.unit == "share" for c in cells) and (out / "win_rates.png").exists():
        lines += ["", "![win rates](win_rates.png)"]
    if extra:
        lines += ["", *extra]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def plot_win_rates(
    out: Path,
    cells: list[Cell],
    numbers: dict[str, PaperNumber],
    stem: str = "win_rates",
    reference: float = 0.5,
) -> list[Path]:
    """Bars of our score shares with 95% intervals; the paper's number as a marker (`stem`.png/.svg);
    a dotted line at `reference` (no edge)."""
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    measured = [c for c in cells if c.score is not None and c.unit in ("share", "rounds")]
    if not measured:
        return []
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(measured), 3.2))
    xs = range(len(measured))
    scores = [c.score or 0.0 for c in measured]
    errs = [
        [s - (c.low or 0.0) for s, c in zip(scores, measured, strict=True)],
        [(c.high or 0.0) - s for s, c in zip(scores, measured, strict=True)],
    ]
    ax.bar(xs, scores, yerr=errs, capsize=4, color="#4878a8", label="ours (95% interval)")
    paper = [(i, numbers[c.name].value) for i, c in enumerate(measured) if c.name in numbers]
    if paper:
        ax.scatter(
            [i for i, _ in paper], [v for _, v in paper], color="#c44e52", marker="D", zorder=3, label="paper"
        )
    ax.axhline(reference, color="grey", lw=0.8, ls=":")
    ax.set_xticks(list(xs), [c.name for c in measured])
    ax.set_ylim(0, 1)
    rounds = measured[0].unit == "rounds"
    ax.set_ylabel(f"{measured[0].agent}: rounds not lost" if rounds else f"{measured[0].agent} score share")
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    paths = [out / f"{stem}.png", out / f"{stem}.svg"]
    for p in paths:
        fig.savefig(p)
    plt.close(fig)
    return paths
