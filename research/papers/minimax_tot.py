"""Minimax Tree of Thoughts (Guo, Hao, Hao, Zheng; docs/papers.md section 1), Table 1: Minimax-ToT
against ToT on Ghost and on Word chain, as tournament files built here.

`paper` scale is the paper's: 100 Ghost games (here 50 per seat order; the paper seats Minimax-ToT
first and draws the first move at random), 52 Word chain games (26 first letters, both seat orders),
D = 3, 3 rollouts per leaf, temperature 0.5, a 120 s clock. `quick` is minutes on the embedded model:
2 Ghost games per seat order and 2 first letters at D = 2, 1 rollout, the example's 15 s clock.

The paper's rule at both scales: "a player who fails to respond or responds incorrectly loses". So the
referee's fault policy is `forfeit` (an illegal or empty answer, such as ToT's when it finds no
plan, loses the game) and both agents run with `fallback = "clock"`: an LLM failure gives no move,
which loses, rather than a random legal move that the cell would count as the method's play (with
the `random` policy and the agents' random fallbacks, a first quick run compared two random players).
"""

from __future__ import annotations

import argparse
import string
from pathlib import Path
from typing import Any

from rich.console import Console

from referee.config import TournamentConfig
from research.papers.cells import Cell, CellPlan, cells_of, measure_cells
from research.papers.llm_spec import llm_of
from research.papers.numbers import paper_numbers

TABLES = {"table1": ["ghost", "word_chain"]}


def _agents(scale: str) -> dict[str, Any]:
    deep = scale == "paper"
    return {
        "minimax_tot": {
            "kind": "minimax_tot",
            "llm": "model",
            "options": {
                "seed": 1,
                "fallback": "clock",  # the paper: failing to respond loses
                "depth": 3 if deep else 2,
                "n": 3 if deep else 2,
                "rollouts": 3 if deep else 1,
                "rollout_max_steps": 8 if deep else 4,
                "temperature": 0.5,
            },
        },
        "tot": {
            "kind": "tot",
            "llm": "model",
            "options": {
                "seed": 2,
                "depth": 3,
                "n": 3 if deep else 2,
                "temperature": 0.5,
                "fallback": "clock",  # the paper: failing to respond loses
            },
        },
    }


def config(cell: str, scale: str, llm: dict[str, Any], games: int | None = None) -> TournamentConfig:
    """The tournament of one cell; `games` caps the games per seat order (tests use 1)."""
    if cell == "ghost":
        per_order = 50 if scale == "paper" else 2
        specs: list[dict[str, Any]] = [
            {"name": "ghost", "params": {"words": "scowl70", "min_word_length": 5}}
        ]
    else:
        letters = string.ascii_lowercase if scale == "paper" else "st"
        if games is not None:
            letters = letters[:games]
        per_order = 1
        specs = [
            {"name": "word_chain", "params": {"threshold": 40, "pos": "adj", "first_letter": c}}
            for c in letters
        ]
    if games is not None:
        per_order = min(per_order, games)
    return TournamentConfig.model_validate(
        {
            "name": f"minimax_tot-{cell}",
            "format": "round_robin",
            "games_per_pairing": per_order,
            "both_seat_orders": True,
            "concurrency": 1,  # llama.cpp's server answers one request at a time
            "deadline_ms": 120_000 if scale == "paper" else 15_000,
            "seed": 11,
            "policy": {"kind": "forfeit"},  # the paper: failing to respond or responding incorrectly loses
            "games": specs,
            "llm": {"model": llm},
            "agents": _agents(scale),
        }
    )


async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
    """Measure the cells of `args.table` (default: every table) into the report folder `out`."""
    llm = llm_of(args)
    numbers = paper_numbers("minimax_tot")
    plans = [
        CellPlan(name, numbers[name].title, config(name, args.scale, llm, args.games), "minimax_tot", "tot",
                 llm["model"])
        for name in cells_of("minimax_tot", TABLES, args.table, args.cells)
    ]  # fmt: skip
    return await measure_cells(out, plans, args.resume, console)
