"""LLM-MCTS ("Can Large Language Models Play Games? A Case Study of A Self-Play Approach"; docs/papers.md
section 2): Tables 2, 3 and 5, each cell one tournament through the real referee.

- Table 2: mate-in-N puzzles (the shipped suite, games/chess/puzzles.py) solved within N moves, per
  depth and method, against Stockfish at full strength (spielbus/puzzles.py builds the tournament).
- Table 3: MiniGo, each method as black against plain MCTS with 1,000 simulations as white; the mean
  territory score (black's territory minus white's, komi left out), and black's wins by that same
  score: territory is the area difference less the difference of stones placed, the area GNU Go's
  with dead stones removed when `gnugo` is installed, else Tromp-Taylor's (games/go/score.py); the
  cell says which, and what the referee's recorded winners (Tromp-Taylor area) were.
- Table 5: full chess games, each method as white against Stockfish skill levels 1 to 3 (100,000 nodes
  per move); score win 1, draw 0.5, loss 0.

`paper` scale: 100 puzzles per depth 3 to 8 (the suite's 100 of each depth), 20 samples at temperature
0.7, MCTS 50 and 10,000, 20 Go games on 7x7 (komi 9: examples/minigo.toml says why), 20 chess games per
level (the paper states no count; its scores are multiples of 1/40). Our copy of the paper lost the
LLM-MCTS simulation counts, so `llm_mcts` runs 50 (the agent's default; docs/papers.md).
`quick` is minutes on the embedded model: depths 3 to 5 with one puzzle each, one 5x5 Go game and one
chess game per cell, 5 vote samples, LLM-MCTS with 4 simulations of depth 2 and 3 samples per node;
the LLM methods play Stockfish level 1 only (a game takes them 15 to 60 minutes here); MCTS (10,000)
is not run (minutes per move here); the cells not run say so.
Limits: a puzzle cell's number is its solve share, a Go cell's a mean with a normal interval.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from bus.protocol import MatchRecord
from games.chess.puzzles import load_puzzles, select
from games.go.score import tromp_taylor_score
from referee.config import TournamentConfig
from research.papers.cells import (
    Cell,
    cells_of,
    counted,
    left_out,
    mean_interval,
    measure,
    play,
    read_cells,
    share_cell,
    wilson,
    write_cells,
)
from research.papers.llm_spec import llm_of
from research.papers.numbers import paper_numbers
from spielbus.go_report import gnugo_scores
from spielbus.puzzles import DEFENDER, AgentSpec, build_config, solved

PAPER = "llm_mcts"
DEPTHS = range(3, 9)
T2_METHODS = ("llm_vote", "mcts50", "mcts10000", "llm_mcts")  # the paper's column order
T3_METHODS = ("llm_vote", "llm_mcts", "mcts50", "mcts10000")
T5_METHODS = ("llm_mcts", "llm_vote", "mcts")
LEVELS = (1, 2, 3)
LLM_METHODS = {"llm_vote", "llm_mcts"}

TABLES = {
    "table2": [f"t2-d{d}-{m}" for d in DEPTHS for m in T2_METHODS],
    "table3": [f"t3-{m}" for m in T3_METHODS],
    "table5": [f"t5-l{lv}-{m}" for m in T5_METHODS for lv in LEVELS],
}


@dataclass(frozen=True)
class Scale:
    """The sizes of one scale."""

    depths: tuple[int, ...]
    puzzles: int  # per depth
    go_board: int
    go_komi: float
    go_games: int
    chess_games: int  # per level
    vote_k: int
    sims: int  # llm_mcts simulations
    k: int  # llm_mcts samples per new node
    chess_depth: int  # llm_mcts plies before the critic in full chess games
    go_depth: int
    puzzle_depth: int | None  # None: the puzzle's own 2N - 1 plies (the outcome is the value)
    mcts_chess: int  # Table 5's MCTS simulations
    deadline_ms: int
    llm_levels: tuple[int, ...]  # Table 5's Stockfish levels the LLM methods play
    skip: tuple[tuple[str, str], ...] = ()  # (method, why) not run at this scale


QUICK = Scale(
    depths=(3, 4, 5), puzzles=1, go_board=5, go_komi=0.5, go_games=1, chess_games=1, vote_k=5, sims=4, k=3,
    chess_depth=2, go_depth=2, puzzle_depth=2, mcts_chess=50, deadline_ms=120_000, llm_levels=(1,),
    skip=(("mcts10000", "not run at quick scale: MCTS with 10,000 simulations takes 13 s to 4 minutes "
                        "per move on this 2-core machine (docs/chess.md); `--scale paper` runs it"),),
)  # fmt: skip
FULL = Scale(
    depths=tuple(DEPTHS), puzzles=100, go_board=7, go_komi=9.0, go_games=20, chess_games=20, vote_k=20,
    sims=50, k=20, chess_depth=4, go_depth=100, puzzle_depth=None, mcts_chess=1000, deadline_ms=600_000,
    llm_levels=LEVELS,
)  # fmt: skip
SCALES = {"quick": QUICK, "paper": FULL}


def _options(method: str, s: Scale, depth: int) -> dict[str, Any]:
    """Agent options of one method; `depth`: llm_mcts's plies before the critic."""
    if method == "llm_vote":
        return {"mode": "vote", "k": s.vote_k, "vote_temperature": 0.7}
    if method == "llm_mcts":
        return {"simulations": s.sims, "depth": depth, "k": s.k, "temperature": 0.7, "critic": "rule"}
    sims = {"mcts50": 50, "mcts10000": 10_000, "mcts": s.mcts_chess}[method]
    return {"simulations": sims, "rollouts": 1}


def _kind(method: str) -> str:
    return {"llm_vote": "llm_policy", "llm_mcts": "llm_mcts"}.get(method, "mcts")


def _with_llm(data: dict[str, Any], llm: dict[str, Any]) -> TournamentConfig:
    """The tournament with `[llm.model]` and every LLM agent pointed at it (one request at a time:
    llama.cpp's server answers one at once)."""
    data["llm"] = {"model": llm}
    for agent in data["agents"].values():
        if agent["kind"] in ("llm_policy", "llm_mcts"):
            agent["llm"] = "model"
    if any(a["kind"] in ("llm_policy", "llm_mcts") for a in data["agents"].values()):
        data["concurrency"] = 1
    data["allow_fallbacks"] = True  # a small model's failed answers are part of the result (recorded)
    return TournamentConfig.model_validate(data)


def table2_config(method: str, depth: int, s: Scale, llm: dict[str, Any], count: int) -> TournamentConfig:
    """Table 2, one (depth, method) cell: the first `count` puzzles of the depth against the defender."""
    puzzles = select(load_puzzles(), [depth], count)
    plies = s.puzzle_depth or 2 * depth - 1
    agent = AgentSpec(label=method, kind=_kind(method), options=_options(method, s, plies))
    cfg = build_config([agent], puzzles, deadline_ms=s.deadline_ms, seed=2)
    return _with_llm(cfg.model_dump(mode="json", exclude_none=True), llm)


def table3_config(method: str, s: Scale, llm: dict[str, Any], games: int) -> TournamentConfig:
    """Table 3, one method as black (the gauntlet seats the challenger first) against MCTS (1,000)."""
    agents = {
        "mcts1000": {"kind": "mcts", "options": {"simulations": 1000, "rollouts": 1}},
        method: {"kind": _kind(method), "options": _options(method, s, s.go_depth)},
    }
    return _with_llm(
        {
            "name": f"llm_mcts-t3-{method}",
            "format": "gauntlet",
            "champions": ["mcts1000"],
            "both_seat_orders": False,
            "games_per_pairing": games,
            "concurrency": 2,
            "deadline_ms": s.deadline_ms,
            "seed": 6,
            "games": [{"name": "go", "params": {"board_size": s.go_board, "komi": s.go_komi}}],
            "agents": agents,
        },
        llm,
    )


def table5_config(method: str, level: int, s: Scale, llm: dict[str, Any], games: int) -> TournamentConfig:
    """Table 5, one method as white against one Stockfish level (the level is the challenger, seated
    first, which is black in OpenSpiel's chess)."""
    sf = f"stockfish{level}"
    options = _options(method, s, s.chess_depth)
    if method == "llm_mcts":
        options["critic"] = "both"  # the paper's hybrid critic (material plus the LLM) in full games
    agents: dict[str, Any] = {
        method: {"kind": _kind(method), "options": options},
        sf: {"kind": "stockfish", "options": {"skill_level": level, "nodes": 100_000}},
    }
    return _with_llm(
        {
            "name": f"llm_mcts-t5-{method}-{sf}",
            "format": "gauntlet",
            "champions": [method],
            "both_seat_orders": False,
            "games_per_pairing": games,
            "concurrency": 2,
            "deadline_ms": s.deadline_ms,
            "max_turns": 400,
            "seed": 5,
            "games": [{"name": "chess"}],
            "agents": agents,
        },
        llm,
    )


def puzzle_cell(name: str, title: str, records: list[MatchRecord], run: str, cfg: TournamentConfig,
                method: str, depth: int, model: str) -> Cell:  # fmt: skip
    """The solve share of a Table 2 cell: mates within `depth` of the method's own moves."""
    verdicts = [solved(r, depth) for r in counted(records) if r.seats and r.seats[0] == method]
    cell = share_cell(name, title, records, run, cfg, method, DEFENDER, model)
    k, n = sum(verdicts), len(verdicts)
    low, high = wilson(k, n)
    return cell.model_copy(
        update={
            "score": k / n if n else None,
            "low": low,
            "high": high,
            "games": n,
            "wins": k,
            "draws": 0,
            "note": f"Solved: mate within {depth} own moves (a slower mate, no mate or a fault is not)."
            + left_out(records),
        }
    )


def placed_difference(rec: MatchRecord, size: int) -> int:
    """Stones black placed minus stones white placed (passes place none; black moves first)."""
    return sum((1 if i % 2 == 0 else -1) for i, m in enumerate(rec.moves) if m.action != size * size)


def go_cell(name: str, title: str, records: list[MatchRecord], run: str, cfg: TournamentConfig,
            method: str, model: str) -> Cell:  # fmt: skip
    """The mean territory score of a Table 3 cell, from black's (the method's) side, komi left out,
    and black's wins by the same score (komi added): every game scored one way. Territory
    (Japanese counting: surrounded points plus prisoners) is the area difference less the
    difference of stones placed, an identity of the two countings; the area comes from GNU Go with
    dead stones removed when it is installed (a game it cannot score is left out, not scored
    another way), else from Tromp-Taylor on the final position."""
    cell = share_cell(name, title, records, run, cfg, method, "mcts1000", model)
    scored = gnugo_scores(records)
    board = cfg.games[0].params
    size, komi = int(board["board_size"]), float(board["komi"])
    values, referee_wins, unscored = [], 0, 0
    for rec in counted(records):
        if not rec.seats or rec.seats[0] != method:
            continue
        area = scored[0].get(rec.match_id) if scored else tromp_taylor_score(rec)
        if area is None:
            unscored += 1
            continue
        values.append(area - placed_difference(rec, size))
        referee_wins += len(rec.returns) == 2 and rec.returns[0] > rec.returns[1]
    wins = sum(1 for v in values if v - komi > 0)
    draws = sum(1 for v in values if v - komi == 0)
    low, high = mean_interval(values)
    how = (
        "GNU Go's final_score with dead stones removed (its area, komi added back)"
        if scored
        else "Tromp-Taylor area as the final position stands, dead stones counted as alive (GNU Go is "
        "not installed, so no dead-stone-aware score: apt-get install gnugo)"
    )
    unscored_out = f"; {unscored} game(s) GNU Go could not score left out" if unscored else ""
    provider = left_out(records)
    return cell.model_copy(
        update={
            "unit": "points",
            "score": sum(values) / len(values) if values else None,
            "low": low,
            "high": high,
            "games": len(values),
            "wins": wins,
            "draws": draws,
            "why": "" if values else f"no game could be scored{unscored_out}.{provider}",
            "note": f"Territory: black's territory minus white's (territory plus prisoners), komi left "
            f"out, from {how}, less the difference of stones placed; {size}x{size} board, komi {komi:g}; "
            f"by this score with komi black won {wins} and drew {draws} of {len(values)} (the referee's "
            f"record, Tromp-Taylor area, says black won {referee_wins}){unscored_out}.{provider}",
        }
    )


def _title(name: str) -> str:
    numbers = paper_numbers(PAPER)
    return numbers[name].title if name in numbers else name


def run_title(name: str, method: str, s: Scale) -> str:
    """The paper cell's title, and, below paper scale, the sizes this run played instead of the
    paper's (a quick cell must not read as a 20-sample vote when it took 5)."""
    if s is FULL:
        return _title(name)
    ours = {
        "llm_vote": f"a vote of {s.vote_k} samples",
        "llm_mcts": f"LLM-MCTS with {s.sims} simulations and {s.k} samples per new node",
        "mcts": f"MCTS with {s.mcts_chess} simulations",
    }.get(method)
    return f"{_title(name)} (this run: {ours})" if ours else _title(name)


async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
    """Measure the cells of `args.table` (default: all three tables) into the report folder `out`."""
    s = SCALES[args.scale]
    llm = llm_of(args)
    names = cells_of(PAPER, TABLES, args.table, args.cells)
    skip = dict(s.skip)
    done = read_cells(out) if args.resume else {}
    cap = args.games
    for name in names:
        if name in done and done[name].score is not None:
            continue
        table, *rest = name.split("-")
        method = rest[-1]
        title, model = run_title(name, method, s), llm["model"] if method in LLM_METHODS else "-"
        try:
            if method in skip:
                done[name] = Cell(name=name, title=title, why=skip[method])
            elif table == "t2":
                depth = int(rest[0][1:])
                if depth not in s.depths:
                    why = f"not run at {args.scale} scale: it plays depths {s.depths[0]} to {s.depths[-1]}"
                    done[name] = Cell(name=name, title=title, why=why)
                else:
                    cfg = table2_config(method, depth, s, llm, min(s.puzzles, cap or s.puzzles))
                    records, folder = await play(out, name, cfg, args.resume, console)
                    done[name] = puzzle_cell(name, title, records, folder, cfg, method, depth, model)
            elif table == "t3":
                cfg = table3_config(method, s, llm, min(s.go_games, cap or s.go_games))
                records, folder = await play(out, name, cfg, args.resume, console)
                done[name] = go_cell(name, title, records, folder, cfg, method, model)
            elif method in LLM_METHODS and int(rest[0][1:]) not in s.llm_levels:
                why = (
                    f"not run at {args.scale} scale: a full chess game of an LLM method takes 15 to 60 "
                    "minutes on the embedded model on two shared cores; `--scale paper` plays levels 1 to 3"
                )
                done[name] = Cell(name=name, title=title, why=why)
            else:
                level = int(rest[0][1:])
                cfg = table5_config(method, level, s, llm, min(s.chess_games, cap or s.chess_games))
                done[name] = await measure(
                    out, name, title, cfg, method, f"stockfish{level}", model, args.resume, console
                )
        except (RuntimeError, ConnectionError) as exc:  # e.g. the embedded LLM server did not start
            done[name] = Cell(name=name, title=title, why=f"the run failed: {exc} (rerun with --resume)")
        write_cells(out, done)  # after every cell, so that --resume keeps it
    return [done[n] for n in names]
