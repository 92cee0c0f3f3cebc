"""A report's cells: each one tournament run through `spielbus.run.run_tournament` (the real referee),
its run folder kept under the report folder, its result in `cells.json` so that `--resume` skips it.

Every played cell carries each seat's share of turns its own method did not decide
(research/papers/decided.py) and a title that names the models that played, not the paper's.

Limits: a cell's number is the first agent's score share (wins + draws / 2) with a 95% Wilson interval,
or (unit "points") a mean with a normal-approximation 95% interval (none from fewer than 2 games);
a cell that cannot be measured is stored with `why` and no number, never a guess. A match that an
LLM provider fault touched (the seat's LLM server failed a decision, or every play of the match was
voided: `referee.outcome.provider_touched`) counts in no number, as in the referee's standings: the
cell says how many were left out, and the seats' shares still count their turns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console

from analysis.summary import AgentQuality, agent_quality
from bus.protocol import MatchRecord
from referee.config import ConfigError, TournamentConfig
from referee.outcome import provider_touched
from referee.ratings import standings
from research.papers.decided import SeatShare, seat_shares
from research.papers.numbers import Unit
from spielbus.analyse import ANALYSIS_FILE, read_analysis
from spielbus.run import RunOptions, run_tournament


class Cell(BaseModel):
    """One measured (or unmeasurable) cell of a paper's table."""

    model_config = ConfigDict(strict=True, extra="forbid")
    name: str
    title: str
    agent: str = ""
    opponent: str = ""
    score: float | None = Field(default=None, allow_inf_nan=False)
    low: float | None = Field(default=None, allow_inf_nan=False)
    high: float | None = Field(default=None, allow_inf_nan=False)
    games: int = 0
    wins: int = 0
    draws: int = 0
    run: str = ""  # the run folder behind the number, relative to the report folder
    model: str = ""
    seed: int = 0
    policy: str = ""
    # Share of the agent's moves that were fallbacks for a failed LLM answer: a high share means the
    # number says little about the method.
    fallback_rate: float = Field(default=0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    # Every seat's turns by who decided them (its method, its fallback, the referee...), and its models.
    seats: list[SeatShare] = Field(default_factory=list)
    why: str = ""  # why the cell has no number
    # What `score` is: a score `share` (wins + draws / 2, Wilson interval), an `accuracy` over `games`
    # test cases, a mean count of LLM `calls` over `games` syntheses, a mean `payoff`, an `elo` rating.
    unit: Unit = "share"
    note: str = ""  # where the number comes from beyond `run` (e.g. the model folders)
    # The agent's and the opponent's move quality (docs/analysis.md), from the run folder's
    # analysis.jsonl when `spielbus analyse` has scored it; `--resume` picks it up afterwards.
    quality: list[AgentQuality] = Field(default_factory=list)


def wilson(successes: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95% Wilson score interval of a proportion (draws count half)."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def mean_interval(values: list[float], z: float = 1.96) -> tuple[float | None, float | None]:
    """A 95% normal-approximation interval of a mean; (None, None) from fewer than 2 values."""
    n = len(values)
    if n < 2:
        return None, None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean - z * sd / math.sqrt(n), mean + z * sd / math.sqrt(n)


def counted(records: list[MatchRecord]) -> list[MatchRecord]:
    """The records a cell's number counts: those no LLM provider fault touched. An unplayed match
    (every play voided) has returns of 0 for all, which read as a draw; a provider's failure is not
    the model's play."""
    return [r for r in records if not provider_touched(r)]


def left_out(records: list[MatchRecord]) -> str:
    """The note on the matches `counted` leaves out ('' when none), e.g. ' 1 match(es) left out: ...'."""
    out = [r for r in records if provider_touched(r)]
    if not out:
        return ""
    unplayed = sum(r.outcome == "void" for r in out)
    return (
        f" {len(out)} match(es) left out: an LLM provider fault (the server failed a decision, not the "
        f"model) touched them, {unplayed} unplayed after every play was voided."
    )


def score_of(records: list[MatchRecord], agent: str) -> tuple[int, int, int]:
    """Games, wins and draws of `agent` in two-player records (a win: the better rank); a match a
    provider fault touched is not counted (`counted`)."""
    games = wins = draws = 0
    for rec in counted(records):
        if agent not in rec.seats or len(rec.returns) != len(rec.seats):
            continue
        me = rec.seats.index(agent)
        other = rec.returns[1 - me]
        games += 1
        if rec.returns[me] > other:
            wins += 1
        elif rec.returns[me] == other:
            draws += 1
    return games, wins, draws


# The models the papers' own cell titles name; a title names the model that played instead.
PAPER_MODELS = (
    "Gemini 2.5 Pro",
    "Llama-2-13B",
    "Llama 2 13B",
    "gpt-3.5-turbo-instruct",
    "gpt-4",
    "Qwen2.5-32B",
)


def played_title(title: str, seats: list[SeatShare]) -> str:
    """`title` with the paper's model names replaced by the models that played (those of the seats'
    provenance), or those models appended when the title names none."""
    models = list(dict.fromkeys(m for s in seats for m in s.models))
    if not models:
        return title
    played = ", ".join(models)
    named = [m for m in PAPER_MODELS if m in title]
    for m in named:
        title = title.replace(m, played)
    if named:
        return title
    who = "; ".join(f"{s.agent} on {', '.join(s.models)}" for s in seats if s.models)
    return f"{title} ({who})"


def read_cells(out: Path) -> dict[str, Cell]:
    path = out / "cells.json"
    if not path.exists():
        return {}
    return {c["name"]: Cell.model_validate(c) for c in json.loads(path.read_text())}


def write_cells(out: Path, cells: dict[str, Cell]) -> None:
    (out / "cells.json").write_text(json.dumps([c.model_dump() for c in cells.values()], indent=2) + "\n")


def _unfinished_run(runs: Path) -> Path | None:
    """The run folder an interrupted earlier attempt left (the newest), to resume."""
    folders = sorted((p for p in runs.iterdir() if (p / "schedule.jsonl").exists()), key=lambda p: p.name)
    return folders[-1] if folders else None


async def play(
    out: Path, name: str, config: TournamentConfig, resume: bool, console: Console
) -> tuple[list[MatchRecord], str]:
    """Run one cell's tournament into `out/runs/<name>/` (continuing an interrupted one on `resume`);
    its records and its run folder relative to `out`."""
    runs = out / "runs" / name
    runs.mkdir(parents=True, exist_ok=True)
    earlier = _unfinished_run(runs) if resume else None
    opts = RunOptions(run_dir=str(runs), quiet=True, resume=str(earlier) if earlier else None)
    result = await run_tournament(config, opts, console)
    return result.records, str(result.path.relative_to(out))


def share_cell(
    name: str,
    title: str,
    records: list[MatchRecord],
    run: str,
    config: TournamentConfig,
    agent: str,
    opponent: str,
    model: str,
) -> Cell:
    """The cell of `agent`'s score share (wins + draws / 2) in `records`, with its Wilson interval."""
    games, wins, draws = score_of(records, agent)
    low, high = wilson(wins + draws / 2, games)
    rates = {s.agent: s.fallback_rate for s in standings(records)}
    seats = seat_shares(records)
    return Cell(
        name=name,
        title=played_title(title, seats),
        agent=agent,
        opponent=opponent,
        score=(wins + draws / 2) / games if games else None,
        low=low,
        high=high,
        games=games,
        wins=wins,
        draws=draws,
        run=run,
        model=model,
        seed=config.seed,
        policy=config.policy.kind,
        fallback_rate=rates.get(agent, 0.0),
        seats=seats,
        why="" if games else f"no match finished (see the run folder's failures).{left_out(records)}",
        note=left_out(records).strip(),
    )


async def measure(
    out: Path,
    name: str,
    title: str,
    config: TournamentConfig,
    agent: str,
    opponent: str,
    model: str,
    resume: bool,
    console: Console,
) -> Cell:
    """Run one cell's tournament and score `agent`'s share against `opponent`."""
    records, run = await play(out, name, config, resume, console)
    return share_cell(name, title, records, run, config, agent, opponent, model)


@dataclass(frozen=True)
class CellPlan:
    """One cell to measure: its tournament and whose score it reports."""

    name: str
    title: str
    config: TournamentConfig
    agent: str
    opponent: str
    model: str


def with_quality(out: Path, cell: Cell) -> Cell:
    """`cell` with its two agents' move-quality figures, if its run folder has been analysed."""
    path = out / cell.run / ANALYSIS_FILE
    if not cell.run or not path.is_file():
        return cell
    table = agent_quality(read_analysis(path, repair=False))
    return cell.model_copy(update={"quality": [q for q in table if q.agent in (cell.agent, cell.opponent)]})


async def measure_cells(out: Path, plans: list[CellPlan], resume: bool, console: Console) -> list[Cell]:
    """Measure each planned cell in order, skipping finished ones on `resume` (their move quality
    refreshed from an analysis done since); cells.json after each."""
    done = read_cells(out) if resume else {}
    for plan in plans:
        if plan.name in done and done[plan.name].score is not None:
            done[plan.name] = with_quality(out, done[plan.name])
            continue
        cell = await measure(
            out, plan.name, plan.title, plan.config, plan.agent, plan.opponent, plan.model, resume, console
        )
        done[plan.name] = with_quality(out, cell)
        write_cells(out, done)  # after every cell, so that --resume keeps it
    write_cells(out, done)
    return [done[p.name] for p in plans]


def cells_of(
    paper: str, tables: Mapping[str, Sequence[str]], table: str | None, only: str | None = None
) -> list[str]:
    """The cell names of one table, or of every table (in order, once each) when `table` is None;
    `only` (`--cells A,B`) keeps the named ones."""
    if table is None:
        names = list(dict.fromkeys(n for names in tables.values() for n in names))
    elif table not in tables:
        raise ConfigError(f"{paper} has tables {sorted(tables)}, not {table!r}")
    else:
        names = list(tables[table])
    if only:
        wanted = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in names]
        if unknown:
            raise ConfigError(f"--cells {unknown}: not cells of {paper} {table or ''} (cells: {names})")
        names = [n for n in names if n in wanted]
    return names
