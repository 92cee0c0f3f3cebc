"""Printing a tournament's outcome: standings, ratings with 95% intervals, faults."""

from __future__ import annotations

from collections import Counter

from rich.console import Console
from rich.table import Table

from bus.protocol import FAULT_REASONS, MatchRecord
from referee.ratings import Rating, Standing
from referee.sprt import SprtStatus
from spielbus.go_report import print_go_scores


def outcome_counts(records: list[MatchRecord]) -> dict[str, int]:
    return dict(Counter(r.outcome for r in records))


def fault_counts(records: list[MatchRecord]) -> dict[str, int]:
    c: Counter[str] = Counter(f.reason for r in records for f in r.faults)
    return {reason: c.get(reason, 0) for reason in FAULT_REASONS}


def print_report(
    console: Console, records: list[MatchRecord], table: list[Standing], rates: list[Rating], run_path: str
) -> None:
    n_player = any(len(r.seats) > 2 for r in records)
    cols = ["agent", "played", "W", "L", "D", "points", "mean return", "faults/100 moves"]
    if n_player:
        cols.insert(6, "mean place")
    st = Table(title="Standings")
    for col in cols:
        st.add_column(col, justify="left" if col == "agent" else "right")
    for s in table:
        cells = [s.agent, str(s.played), str(s.wins), str(s.losses), str(s.draws), f"{s.points:g}"]
        cells += [f"{s.mean_place:.2f}"] if n_player else []
        cells += [f"{s.mean_return:+.3g}", f"{s.faults_per_100_moves:.2f}"]
        st.add_row(*cells)
    console.print(st)
    for s in table:
        if s.mostly_fallbacks:
            console.print(
                f"[yellow]warning:[/yellow] {s.fallbacks} of {s.moves} moves of {s.agent} were fallbacks "
                "(its LLM did not answer): its results say nothing about the LLM",
                highlight=False,
            )

    rt = Table(title="Ratings (Bradley-Terry, 95% bootstrap interval; Elo as in the LLM Coaching paper)")
    for col in ("agent", "BT", "95% interval", "Elo"):
        rt.add_column(col, justify="left" if col == "agent" else "right")
    for r in rates:
        rt.add_row(r.agent, f"{r.bt:.0f}", f"[{r.bt_low:.0f}, {r.bt_high:.0f}]", f"{r.elo:.1f}")
    console.print(rt)

    faults = fault_counts(records)
    ft = Table(title="Faults by reason")
    for reason in FAULT_REASONS:
        ft.add_column(reason, justify="right")
    ft.add_row(*(str(faults[r]) for r in FAULT_REASONS))
    console.print(ft)
    print_go_scores(console, records)  # Go only: the score two ways (Tromp-Taylor, GNU Go) next to win rate
    outcomes = ", ".join(f"{k}: {v}" for k, v in sorted(outcome_counts(records).items()))
    console.print(f"{len(records)} matches ({outcomes})")
    console.print(f"Run folder: [bold]{run_path}[/bold] (matches.jsonl, standings.json, ratings.json)")


def print_sprt(console: Console, st: SprtStatus) -> None:
    """The SPRT's outcome: LLR against its bounds, pentanomial counts, Elo with its 95% interval."""
    unit = "nElo" if st.model == "normalized" else "Elo"
    t = Table(title=f"SPRT {st.tested} vs {st.baseline}: H0 {unit} {st.elo0:g}, H1 {unit} {st.elo1:g}")
    for col in ("pairs", "LL LD WL+DD WD WW", "LLR", "bounds", "Elo (95%)", "decision"):
        t.add_column(col, justify="right")
    t.add_row(
        str(st.pairs),
        " ".join(map(str, st.pentanomial)),
        f"{st.llr:.2f}",
        f"({st.lower:.2f}, {st.upper:.2f})",
        st.elo_text().removeprefix("Elo "),
        st.decision_text(),
    )
    console.print(t)
