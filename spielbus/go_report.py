"""The Go table of the report (Table 3 of the LLM-MCTS paper, "Can Large Language Models Play
Games?": black's territory minus white's, no komi): per agent, win rate and the mean score from
the agent's side and as black, scored two ways and labelled so:

- **Tromp-Taylor area** (games/go/score.py): the final position as it stands, dead stones
  included. OpenSpiel decides the winner by this (less komi).
- **GNU Go, dead stones removed**: GNU Go's `final_score` (Chinese rules, its own life-and-death
  analysis; games/go/gnugo.py) with komi added back, so both columns are area differences
  without komi. This is the score a Go player would count, and the reading of Table 3 used here.
  Shown when GNU Go is installed (`make system-deps`); otherwise the table says it is missing.

Printed only when the tournament played Go. Limits: GNU Go's dead-stone analysis is an engine's
judgement, not a proof; a game GNU Go cannot score (its process fails) is left out of that column
and counted in the caption.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict

from rich.console import Console
from rich.table import Table

from bus.protocol import MatchRecord
from games.go.gnugo import final_score, find_gnugo, gnugo_argv, go_setup
from games.go.gtp import GtpEngine, GtpEngineDied, GtpError
from games.go.score import tromp_taylor_score

log = logging.getLogger(__name__)


def gnugo_scores(records: list[MatchRecord]) -> tuple[dict[str, float], int] | None:
    """match id -> GNU Go's dead-stone-aware black-minus-white area (no komi), and how many Go
    games it could not score; None if GNU Go is not installed. One engine for all the games."""
    path = find_gnugo()
    if path is None:
        return None
    out: dict[str, float] = {}
    failed = 0
    engine: GtpEngine | None = None
    try:
        for rec in records:
            if rec.game.name != "go" or not rec.moves or len(rec.seats) != 2:
                continue
            try:
                if engine is None or not engine.alive:
                    engine = GtpEngine(gnugo_argv(path))
                size, komi = go_setup(rec.game)
                out[rec.match_id] = final_score(engine, size, komi, [m.action for m in rec.moves])
            except (GtpError, GtpEngineDied, OSError, ValueError) as exc:
                log.warning("GNU Go could not score %s: %s", rec.match_id, exc)
                failed += 1
    finally:
        if engine is not None:
            engine.close()
    return out, failed


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def go_rows(records: list[MatchRecord], dead: dict[str, float] | None = None) -> dict[str, dict[str, float]]:
    """agent -> {games, win_rate, mean_score and mean_as_black (Tromp-Taylor), gnugo_score and
    gnugo_as_black (dead stones removed, from `dead`: match id -> score)}; nan where there is none."""
    own: dict[str, list[float]] = defaultdict(list)
    black: dict[str, list[float]] = defaultdict(list)
    own_dead: dict[str, list[float]] = defaultdict(list)
    black_dead: dict[str, list[float]] = defaultdict(list)
    wins: dict[str, float] = defaultdict(float)
    for rec in records:
        score = tromp_taylor_score(rec)
        if score is None or len(rec.seats) != 2:
            continue
        other = (dead or {}).get(rec.match_id)
        for seat, agent in enumerate(rec.seats):  # OpenSpiel's Go: seat 0 is black
            sign = 1 if seat == 0 else -1
            own[agent].append(sign * score)
            if other is not None:
                own_dead[agent].append(sign * other)
            if seat == 0:
                black[agent].append(score)
                if other is not None:
                    black_dead[agent].append(other)
            if rec.returns and rec.returns[seat] > rec.returns[1 - seat]:
                wins[agent] += 1
            elif rec.returns and rec.returns[seat] == rec.returns[1 - seat]:
                wins[agent] += 0.5
    return {
        a: {
            "games": len(v),
            "win_rate": wins[a] / len(v),
            "mean_score": _mean(v),
            "mean_as_black": _mean(black[a]),
            "gnugo_score": _mean(own_dead[a]),
            "gnugo_as_black": _mean(black_dead[a]),
        }
        for a, v in sorted(own.items())
    }


def _cell(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:+.1f}"


def print_go_scores(console: Console, records: list[MatchRecord], use_gnugo: bool = True) -> None:
    if not any(r.game.name == "go" for r in records):
        return
    scored = gnugo_scores(records) if use_gnugo else None
    rows = go_rows(records, scored[0] if scored else None)
    if not rows:
        return
    t = Table(title="Go (Table 3): black's area minus white's, no komi, scored two ways")
    cols = (
        "agent",
        "games",
        "win rate",
        "Tromp-Taylor own",
        "Tromp-Taylor black",
        "GNU Go own",
        "GNU Go black",
    )
    for col in cols:
        t.add_column(col, justify="left" if col == "agent" else "right")
    for agent, r in rows.items():
        t.add_row(
            agent,
            str(int(r["games"])),
            f"{r['win_rate']:.2f}",
            _cell(r["mean_score"]),
            _cell(r["mean_as_black"]),
            _cell(r["gnugo_score"]),
            _cell(r["gnugo_as_black"]),
        )
    common = (
        "own: the mean from the agent's side; black: its games as black; draws count 1/2 in the win rate. "
        "Tromp-Taylor: the final position as it stands, dead stones counted (OpenSpiel's scoring). "
    )
    # Which columns stand for the paper's "territory" is said on the table itself, not only in docs.
    table3 = "Table 3's territory is the GNU Go columns (dead stones removed). "
    if scored is None:
        t.caption = (
            common
            + table3
            + "GNU Go is not installed (apt-get install gnugo): no dead-stone-aware score, and "
            "Tromp-Taylor alone is not Table 3's territory."
        )
    else:
        missing = f"; {scored[1]} game(s) it could not score" if scored[1] else ""
        t.caption = (
            common
            + table3
            + f"GNU Go: its final_score with dead stones removed, Chinese rules, komi added back{missing}."
        )
    console.print(t)
