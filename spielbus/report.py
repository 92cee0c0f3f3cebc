"""A tournament's outcome: standings (with fallbacks, LLM calls and tokens per move, and what LLM
providers did apart from the play), ratings (Bradley-Terry with 95% profile-likelihood intervals,
Elo, Plackett-Luce), faults, printed; and at the end of `spielbus run` (`report_run`) the run
folder's summary files written beside them. An interrupted run writes its summary too
(`write_interrupted_summary`)."""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from bus.protocol import FAULT_REASONS, MatchRecord, MatchSpec
from referee.config import TournamentConfig
from referee.ratings import PL_MODEL, Rating, Standing
from referee.run_folder import RunFolder, summarize
from referee.sprt import SprtStatus
from spielbus.go_report import print_go_scores
from spielbus.sprt_run import sprt_status, sprt_summary

# Piped or logged output (no terminal): rich would assume 80 columns and cut the tables; no line of
# ours needs more than this, so a log keeps every column whole.
PIPED_WIDTH = 240


def run_console() -> Console:
    """The console of `spielbus run`/`submit`: the terminal's width on a terminal, else (a pipe, a
    log file) PIPED_WIDTH unless COLUMNS says otherwise."""
    console = Console()
    if not console.is_terminal and not os.environ.get("COLUMNS"):
        console = Console(width=PIPED_WIDTH)
    return console


def outcome_counts(records: list[MatchRecord]) -> dict[str, int]:
    return dict(Counter(r.outcome for r in records))


def fault_counts(records: list[MatchRecord]) -> dict[str, int]:
    c: Counter[str] = Counter(f.reason for r in records for f in r.faults)
    return {reason: c.get(reason, 0) for reason in FAULT_REASONS}


def fallback_warnings(table: list[Standing], threshold: float) -> list[str]:
    """One line per agent more than `threshold` of whose moves were fallbacks."""
    return [
        f"{s.fallbacks} of {s.moves} moves of {s.agent} ({s.fallback_share:.0%}) were fallbacks for a "
        f"failed LLM answer, over the {threshold:.0%} threshold: its results say little about its LLM"
        for s in table
        if s.over_fallbacks(threshold)
    ]


def decided_by_timeouts(records: list[MatchRecord], built_in: set[str]) -> dict[str, int]:
    """Per agent of `built_in` (the agents the run started itself), the matches it forfeited by
    running out of time: results that measure the machine's load, not the agent."""
    lost: Counter[str] = Counter()
    for r in records:
        agents = {r.seats[f.seat] for f in r.faults if f.reason == "timeout" and f.seat in r.forfeited}
        lost.update(a for a in agents if a in built_in)
    return dict(sorted(lost.items()))


def timeout_warning(decided: dict[str, int], matches: int) -> str:
    """The line that says a run's results were decided by its own agents' clocks, and what to do."""
    who = ", ".join(f"{a} ({n} of {matches} matches)" for a, n in decided.items())
    return (
        f"matches were decided by timeouts of built-in agents: {who}. Their results measure this "
        "machine's load, not the agents: raise `deadline_ms` in the tournament file, or lighten the "
        "agents' options (e.g. fewer simulations); the run fails"
    )


PROVIDER_COLUMNS = ("provider_faults", "voided", "excluded", "truncated", "filtered", "bad_output")


def print_provider_table(console: Console, table: list[Standing]) -> None:
    """Per agent, what its LLM provider did apart from its play (only when anything happened):
    provider faults, voided plays, matches left out of the results, truncated and filtered
    calls, and the model's own bad output (illegal and malformed answers)."""
    if not any(getattr(s, c) for s in table for c in PROVIDER_COLUMNS[:-1]):
        return
    pt = Table(
        title="LLM providers",
        caption="provider faults are not the agent's play: matches they touched are left out (excluded)",
    )
    for col in ("agent", *PROVIDER_COLUMNS):
        pt.add_column(col.replace("_", " "), justify="left" if col == "agent" else "right")
    for s in table:
        pt.add_row(s.agent, *(str(getattr(s, c)) for c in PROVIDER_COLUMNS))
    console.print(pt)


def print_report(
    console: Console,
    records: list[MatchRecord],
    table: list[Standing],
    rates: list[Rating],
    run_path: str,
    *,
    fallback_threshold: float = 0.05,
) -> None:
    n_player = any(len(r.seats) > 2 for r in records)
    cols = ["agent", "played", "W", "L", "D", "points", "mean return", "faults/100 moves"]
    cols += ["fallbacks", "calls/move", "tokens/move"]
    if n_player:
        cols.insert(6, "mean place")
    priced = any(s.cost_usd is not None for s in table)
    cols += ["cost $"] if priced else []
    st = Table(title="Standings")
    for col in cols:
        st.add_column(col, justify="left" if col == "agent" else "right")
    for s in table:
        cells = [s.agent, str(s.played), str(s.wins), str(s.losses), str(s.draws), f"{s.points:g}"]
        cells += [f"{s.mean_place:.2f}"] if n_player else []
        cells += [f"{s.mean_return:+.3g}", f"{s.faults_per_100_moves:.2f}"]
        cells += [f"{s.fallback_rate:.1%}", f"{s.calls_per_move:.2f}", f"{s.tokens_per_move:.0f}"]
        cells += [f"{s.cost_usd:.4f}" if s.cost_usd is not None else "-"] if priced else []
        st.add_row(*cells)
    console.print(st)
    print_provider_table(console, table)
    for line in fallback_warnings(table, fallback_threshold):
        console.print(f"[yellow]warning:[/yellow] {line}", highlight=False)

    rt = Table(
        title="Ratings",
        caption=f"BT: Bradley-Terry with its 95% profile-likelihood interval; PL: {PL_MODEL}; "
        "records rated in schedule order (docs/referee.md)",
    )
    for col in ("agent", "BT", "BT 95%", "Elo", "PL mu ± sigma"):
        rt.add_column(col, justify="left" if col == "agent" else "right")
    for r in rates:
        pl = f"{r.pl_mu:.1f} ± {r.pl_sigma:.1f}" if r.pl_mu is not None and r.pl_sigma is not None else ""
        rt.add_row(r.agent, f"{r.bt:.0f}", f"[{r.bt_low:.0f}, {r.bt_high:.0f}]", f"{r.elo:.1f}", pl)
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


@dataclass(frozen=True)
class RunNotes:
    """What the run itself knew besides its records: matches without a record (id -> why),
    records refused, the bus it ran on, and how many matches a resumed run found done."""

    failed: dict[str, str]
    rejected: int
    nats: str | None
    resumed: int | None = None


def _costs(table: list[Standing]) -> dict[str, float]:
    return {s.agent: s.cost_usd for s in table if s.cost_usd is not None}


def write_interrupted_summary(
    folder: RunFolder, config: TournamentConfig, tid: str, specs: list[MatchSpec], signal: str | None
) -> None:
    """The summary files of a run stopped by a signal, from the records it has."""
    done = folder.read_records(specs)
    table, rates = summarize(done, config)
    extra = {"tournament": tid, "matches": len(done), "scheduled": len(specs), "interrupted": signal}
    folder.write_summary(table, rates, {**extra, **sprt_summary(config, done)})


def report_run(
    console: Console,
    folder: RunFolder,
    config: TournamentConfig,
    tid: str,
    specs: list[MatchSpec],
    notes: RunNotes,
) -> tuple[list[MatchRecord], list[str], dict[str, int]]:
    """The summary files and the console report after play; returns the records, the agents
    more than `fallback_threshold` of whose moves were fallbacks, and the built-in agents whose
    timeouts decided matches (with how many)."""
    # Read back once, after play (in schedule order, so a resumed run's ratings equal an
    # uninterrupted run's): nothing per record was held while matches were being played.
    records = folder.read_records(specs)
    table, rates = summarize(records, config)
    failed = notes.failed  # the caller's own map: what is added here makes the run exit 1
    # Every play of these was voided by a provider fault: recorded, but not played.
    failed.update({r.match_id: "unplayed (provider faults)" for r in records if r.outcome == "void"})
    fallback_agents = [s.agent for s in table if s.over_fallbacks(config.fallback_threshold)]
    timeouts = decided_by_timeouts(records, {n for n, a in config.agents.items() if not a.external})
    folder.write_summary(
        table,
        rates,
        {
            "tournament": tid,
            "matches": len(records),
            "scheduled": len(specs),
            "failed": failed,
            "rejected_records": notes.rejected,
            "mostly_fallbacks": [s.agent for s in table if s.mostly_fallbacks],
            "fallback_threshold": config.fallback_threshold,
            "over_fallback_threshold": fallback_agents,
            "decided_by_builtin_timeouts": timeouts,
            "nats": notes.nats,
            **({"resumed": notes.resumed} if notes.resumed is not None else {}),
            # Dollars per agent by its price table (absent when no agent has one: cost unknown).
            **({"cost_usd": costs} if (costs := _costs(table)) else {}),
            **sprt_summary(config, records),
        },
    )
    threshold = config.fallback_threshold
    print_report(console, records, table, rates, str(folder.path), fallback_threshold=threshold)
    if (sprt := sprt_status(config, records)) is not None:
        print_sprt(console, sprt)
    if failed:
        reasons = ", ".join(f"{n} {r}" for r, n in Counter(failed.values()).most_common())
        console.print(
            f"[red]{len(failed)} of {len(specs)} matches were not played:[/red] {reasons} "
            f"(e.g. {', '.join(sorted(failed)[:3])}); listed in summary.json",
            highlight=False,
        )
    if fallback_agents and not config.allow_fallbacks:
        console.print(
            f"[red]more than {config.fallback_threshold:.0%} of the moves of "
            f"{', '.join(fallback_agents)} were fallbacks:[/red] the run fails (set "
            "`allow_fallbacks = true`, or raise `fallback_threshold`, in the tournament file to "
            "accept that)",
            highlight=False,
        )
    if timeouts:
        console.print(f"[red]{timeout_warning(timeouts, len(records))}[/red]", highlight=False)
    return records, fallback_agents, timeouts
