"""The Game of Wordn't (Cortez; docs/papers.md section 4): the bot's advantage over the paper's naive
and careful opponents, each cell one tournament through the real referee.

The paper prints no table or figure of results: it argues that the bot should maximise the BWR
against naive opponents and the average NIR against careful ones. Each cell seats one bot (`wordnt`
with `naive = true`: BWR; or the default: AVG NIR) with three opponents of one model (`wordnt` with
`opponent = "naive"`: any proposal with basis words; `"careful"`: a sure win if any, else any
proposal with BWR > 0), four players as the paper's "usually 4-6", seats redrawn every round.
A cell's number is the share of rounds the bot did not lose, with a 95% Wilson interval over rounds;
a player with no edge loses one round in four (75% not lost), and the opponents' own share is beside it.

`quick`: one match of 40 rounds per cell (seconds to minutes, no LLM); `paper`: 5 matches of 100
rounds (the paper's example game length). Word list SCOWL size 70, words of at least 4 letters.
Limits: rounds are counted as independent trials for the interval.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console

from bus.protocol import MatchRecord
from referee.config import TournamentConfig
from referee.ratings import standings
from research.papers.cells import Cell, cells_of, play, read_cells, wilson, write_cells
from research.papers.decided import seat_shares
from research.papers.report import plot_win_rates

PAPER = "wordnt"
PLAYERS = 4
BOTS = {"bwr": ("BWR bot", {"naive": True}), "nir": ("AVG NIR bot", {})}
OPPONENTS = ("naive", "careful")
TABLES = {"advantage": [f"{o}-{b}" for o in OPPONENTS for b in BOTS]}
GAME = {"players": PLAYERS, "min_word_length": 4, "words": "scowl70"}
SIZES = {"quick": (1, 40), "paper": (5, 100)}  # (matches, rounds per match)


def config(cell: str, scale: str, games: int | None = None, rounds: int | None = None) -> TournamentConfig:
    """One cell's tournament: the bot and three opponents of one model; `games` caps the matches,
    `rounds` the rounds per match."""
    opponent, bot = cell.split("-")
    matches, per_match = SIZES[scale]
    rounds = min(per_match, rounds or per_match)
    agents: dict[str, Any] = {"bot": {"kind": "wordnt", "options": {**BOTS[bot][1], "seed": 1}}}
    for i in range(1, PLAYERS):
        agents[f"{opponent}{i}"] = {"kind": "wordnt", "options": {"opponent": opponent, "seed": 1 + i}}
    return TournamentConfig.model_validate(
        {
            "name": f"wordnt-{cell}",
            "format": "round_robin",
            "games_per_pairing": min(matches, games or matches),
            "both_seat_orders": False,  # the game redraws the seat order every round
            "concurrency": 1,
            # Generous: each agent process builds the word index (seconds) and, for the AVG NIR bot, the
            # empty string's analysis before its first move; a busy machine must not turn that into
            # a forfeit, which would say nothing about the strategies.
            "deadline_ms": 120_000,
            "max_turns": 100 * rounds,
            "seed": 11,
            "games": [{"name": "wordnt", "params": {**GAME, "rounds": rounds}}],
            "agents": agents,
        }
    )


def rounds_cell(name: str, records: list[MatchRecord], run: str, cfg: TournamentConfig) -> Cell:
    """The bot's share of rounds not lost (returns are minus each player's losses). A match that ended
    in a forfeit or at the turn cap is left out (its returns are the referee's, not the rounds') and
    counted in the note."""
    opponent, bot = name.split("-")
    rounds = lost = opp_rounds = opp_lost = 0
    played = [r for r in records if r.outcome not in ("forfeit", "max_turns", "error") and r.returns]
    per = int(cfg.games[0].params["rounds"])
    for rec in played:
        for agent, ret in zip(rec.seats, rec.returns, strict=True):
            if agent == "bot":
                rounds, lost = rounds + per, lost + int(-ret)
            else:
                opp_rounds, opp_lost = opp_rounds + per, opp_lost + int(-ret)
    kept = rounds - lost
    low, high = wilson(kept, rounds)
    opp = 1 - opp_lost / opp_rounds if opp_rounds else None
    fallbacks = {s.agent: s.fallback_rate for s in standings(records)}
    dropped = len(records) - len(played)
    faults = sorted({f"{f.agent}: {f.reason}" for r in records if r not in played for f in r.faults})
    why_out = ", ".join(faults) or "-"
    left_out = f" {dropped} match(es) left out (forfeit or turn cap: {why_out})." if dropped else ""
    return Cell(
        name=name,
        title=f"{BOTS[bot][0]} among {PLAYERS - 1} {opponent} opponents: rounds not lost",
        agent="bot",
        opponent=f"{PLAYERS - 1} {opponent} opponents",
        unit="rounds",
        score=kept / rounds if rounds else None,
        low=low,
        high=high,
        games=rounds,
        wins=kept,
        run=run,
        model="-",
        seed=cfg.seed,
        policy=cfg.policy.kind,
        fallback_rate=fallbacks.get("bot", 0.0),
        seats=seat_shares(records),
        why="" if rounds else f"no match played to its end (see the run folder).{left_out}",
        note=f"Counted over rounds ({len(played)} match(es)); no edge is {1 - 1 / PLAYERS:.0%} not lost; "
        + (f"the opponents kept {opp:.0%} of theirs." if opp is not None else "no opponent rounds.")
        + left_out,
    )


async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
    """Measure the cells of `args.table` (default: the advantage table) into the report folder `out`."""
    names = cells_of(PAPER, TABLES, args.table, args.cells)
    done = read_cells(out) if args.resume else {}
    for name in names:
        if name in done and done[name].score is not None:
            continue
        cfg = config(name, args.scale, args.games, args.rounds)
        try:
            records, folder = await play(out, name, cfg, args.resume, console)
        except (RuntimeError, ConnectionError) as exc:  # the run could not start or finish
            done[name] = Cell(name=name, title=name, why=f"the run failed: {exc} (rerun with --resume)")
        else:
            done[name] = rounds_cell(name, records, folder, cfg)
        write_cells(out, done)  # after every cell, so that --resume keeps it
    return [done[n] for n in names]


def extra(out: Path, cells: list[Cell]) -> list[str]:
    """The advantage as the paper frames it (rows: opponent model, columns: the bot's metric)."""
    by = {c.name: c for c in cells}
    lines = [
        "## The bot's advantage, rounds not lost (no edge: 75%)",
        "",
        "The paper reports no measurements; it argues that the BWR is the best choice against naive "
        "opponents and the average NIR against careful ones. Ours (95% Wilson interval over rounds):",
        "",
        "| opponents | " + " | ".join(BOTS[b][0] for b in BOTS) + " |",
        "|---" * (len(BOTS) + 1) + "|",
    ]
    for o in OPPONENTS:
        row = []
        for b in BOTS:
            c = by.get(f"{o}-{b}")
            if c is None or c.score is None:
                row.append("-" if c is None else f"not measured: {c.why}")
            else:
                row.append(f"{c.score:.0%} [{c.low or 0:.0%}, {c.high or 0:.0%}] of {c.games} rounds")
        lines.append(f"| {o} | " + " | ".join(row) + " |")
    if plot_win_rates(out, cells, {}, stem="advantage", reference=1 - 1 / PLAYERS):
        lines += ["", "![rounds not lost](advantage.png)"]
    return lines
