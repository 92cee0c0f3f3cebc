"""The Go table of the report: per agent, win rate and mean territory score (Table 3 of the
LLM-MCTS paper, "Can Large Language Models Play Games?": black's territory minus white's, no
komi), from the agent's side and as black. Printed only when the tournament played Go."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.table import Table

from bus.protocol import MatchRecord
from games.go_score import territory_score


def go_rows(records: list[MatchRecord]) -> dict[str, dict[str, float]]:
    """agent -> {games, win_rate, mean_score (own view), mean_as_black (None-free: nan if never black)}."""
    own: dict[str, list[float]] = defaultdict(list)
    black: dict[str, list[float]] = defaultdict(list)
    wins: dict[str, float] = defaultdict(float)
    for rec in records:
        score = territory_score(rec)
        if score is None or len(rec.seats) != 2:
            continue
        for seat, agent in enumerate(rec.seats):  # OpenSpiel's Go: seat 0 is black
            own[agent].append(score if seat == 0 else -score)
            if seat == 0:
                black[agent].append(score)
            if rec.returns and rec.returns[seat] > rec.returns[1 - seat]:
                wins[agent] += 1
            elif rec.returns and rec.returns[seat] == rec.returns[1 - seat]:
                wins[agent] += 0.5
    return {
        a: {
            "games": len(v),
            "win_rate": wins[a] / len(v),
            "mean_score": sum(v) / len(v),
            "mean_as_black": sum(black[a]) / len(black[a]) if black[a] else float("nan"),
        }
        for a, v in sorted(own.items())
    }


def print_go_scores(console: Console, records: list[MatchRecord]) -> None:
    rows = go_rows(records)
    if not rows:
        return
    t = Table(title="Go: territory score (black - white area, no komi; draws count 1/2)")
    for col in ("agent", "games", "win rate", "mean score (own side)", "mean score as black"):
        t.add_column(col, justify="left" if col == "agent" else "right")
    for agent, r in rows.items():
        t.add_row(
            agent,
            str(int(r["games"])),
            f"{r['win_rate']:.2f}",
            f"{r['mean_score']:+.1f}",
            "-" if r["mean_as_black"] != r["mean_as_black"] else f"{r['mean_as_black']:+.1f}",
        )
    console.print(t)
