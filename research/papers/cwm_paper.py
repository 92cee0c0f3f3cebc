"""Code World Models (Lehrach, Hennes, Lázaro-Gredilla et al.; docs/papers.md section 3) for
`spielbus paper cwm [table1|fig2|fig3|calls]`.

- `table1`: per game of the paper's Table 1 (the imperfect-information games, open deck) train and
  test transition and inference accuracy and LLM calls, the mean over the syntheses
  (`research.cwm.eval.evaluate` on each model folder; train numbers and calls from its report.json).
- `fig2` / `fig3`: the `cwm` agent (CWM-(IS)MCTS on the model folder that passed most training tests)
  against GT-(IS)MCTS (`mcts` on the true game, plain UCT), LLM-as-policy (`llm_policy` on `--llm`, or
  the embedded model) and `random`, both seat orders, the `forfeit` fault policy, one tournament per
  game and opponent through the real referee. The paper's payoff games (Bargaining, Leduc poker, Gin
  rummy) report cwm's mean payoff, the others its score share (a draw counts half).
- `calls`: Table 1's LLM-calls column and the curve of the best candidate's train accuracy against
  the LLM calls made (`cwm_calls.png` / `.svg`, from each synthesis's report.json attempts).

Model folders (research/papers/cwm_models.py): with `--llm`, `research.cwm` synthesizes each game
(quick: 1 synthesis of at most 10 calls; paper: 5 of at most 500, the paper's `num_retries`); without,
the hand-written reference model where there is one, and every number that needs a synthesis says
"needs a model that writes code". Sizes: quick plays 2 games per seat order with 100 simulations and
2 rollouts per leaf and evaluates on 20 held-out games; paper plays 100 per seat order with 1,000
simulations and 10 rollouts and evaluates on 10,000 transitions of 100 games.

Table 1 rows and Figure cells measured on a hand-written reference model say so in their title
("hand-written reference model, not synthesized"): they check the evaluation and the agent, not a
synthesis. A synthesis that wrote no code counts as a model with accuracy 0 in Table 1 (0 of its
tests passed) and does not play. `--cells A,B` keeps only the named cells.

Limits: the paper picks a random one of its 5 models per match; here the best one plays every match.
The "online" accuracy columns are not summarised (the `cwm` agent's move stats carry them).
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from agents.cwm.sandbox import SandboxUnavailable, check_available
from bus.protocol import MatchRecord
from games.loader import parse_spec
from referee.config import TournamentConfig
from research.papers.cells import Cell, cells_of, counted, measure, read_cells, wilson, write_cells
from research.papers.cwm_models import (
    NEEDS_CODE_MODEL,
    Models,
    Synthesis,
    best_folder,
    evaluation,
    folder_path,
    model_folders,
    report_of,
)
from research.papers.llm_spec import llm_of, synthesis_llm
from research.papers.numbers import paper_numbers

PERFECT = {
    "tic_tac_toe": "tic_tac_toe",
    "connect_four": "connect_four",
    "backgammon": "backgammon",
    "gen_tic_tac_toe": "mnk(m=6,n=6,k=4)",
    "gen_chess": "army5x5a",
}
IMPERFECT = {
    "bargaining": "bargaining",
    "leduc_poker": "leduc_poker",
    "gin_rummy": "gin_rummy",
    "quadranto": "quadranto",
    "hand_of_war": "hand_of_war",
}
GAMES = {**PERFECT, **IMPERFECT}
PAYOFF_GAMES = frozenset({"bargaining", "leduc_poker", "gin_rummy"})
OPPONENTS = ("gt_mcts", "llm_policy", "random")
METRICS = ("train_transition", "test_transition", "train_inference", "test_inference", "llm_calls")
SYNTHESIS_METRICS = frozenset({"train_transition", "train_inference", "llm_calls"})

TABLES = {
    "table1": [f"{g}-{m}" for g in IMPERFECT for m in METRICS],
    "fig2": [f"{g}-vs-{o}" for g in PERFECT for o in OPPONENTS],
    "fig3": [f"{g}-vs-{o}" for g in IMPERFECT for o in OPPONENTS],
    "calls": [f"{g}-llm_calls" for g in IMPERFECT],
}


@dataclass(frozen=True)
class Sizes:
    syntheses: int
    budget: int
    per_order: int
    simulations: int
    rollouts: int
    deadline_ms: int
    eval_games: int
    eval_transitions: int


SIZES = {
    "quick": Sizes(1, 10, 2, 100, 2, 10_000, 20, 2_000),
    "paper": Sizes(5, 500, 100, 1_000, 10, 60_000, 100, 10_000),
}
EVAL_SEED = 12345
REFERENCE = "hand-written reference model, not synthesized"


def _split(name: str) -> tuple[str, str]:
    """(game key, metric or opponent) of a cell name."""
    game, _, rest = name.partition("-")
    return game, rest.removeprefix("vs-")


def play_config(
    key: str, model_dir: str, opponent: str, sizes: Sizes, llm: dict[str, Any], games: int | None
) -> TournamentConfig:
    """One Figure 2/3 cell: `cwm` on `model_dir` against `opponent` on game `key`, both seat orders."""
    spec = parse_spec(GAMES[key])
    search = {"simulations": sizes.simulations, "rollouts": sizes.rollouts}
    opponents: dict[str, dict[str, Any]] = {
        "gt_mcts": {"kind": "mcts", "options": {**search, "seed": 2, "solve": False}},
        "llm_policy": {"kind": "llm_policy", "llm": "model", "options": {"seed": 3}},
        "random": {"kind": "random", "options": {"seed": 4}},
    }
    cwm = {
        "kind": "cwm",
        "options": {**search, "model": model_dir, "seed": 1, "forfeit_on_model_error": True},
    }
    return TournamentConfig.model_validate(
        {
            "name": f"cwm-{key}-{opponent}",
            "format": "round_robin",
            "games_per_pairing": min(sizes.per_order, games) if games else sizes.per_order,
            "both_seat_orders": True,
            "concurrency": 1,  # one sandbox per cwm agent; llama.cpp answers one request at a time
            "deadline_ms": sizes.deadline_ms,
            "seed": 21,
            "policy": {"kind": "forfeit"},  # the paper: no valid action in the allotted time loses
            "allow_fallbacks": True,  # a small model's failed answers are part of the result
            "games": [{"name": spec.name, "params": spec.params}],
            "llm": {"model": llm} if opponent == "llm_policy" else {},
            "agents": {"cwm": cwm, opponent: opponents[opponent]},
        }
    )


def _payoff_cell(out: Path, cell: Cell) -> Cell:
    """A measured cell as cwm's mean payoff (95% normal interval), from its run's matches.jsonl."""
    lines = (out / cell.run / "matches.jsonl").read_text().splitlines()
    pays = []
    for rec in counted([MatchRecord.model_validate_json(line) for line in lines]):
        if "cwm" in rec.seats and len(rec.returns) == len(rec.seats):
            pays.append(rec.returns[rec.seats.index("cwm")])
    if not pays:
        return cell
    mean = sum(pays) / len(pays)
    half = None
    if len(pays) > 1:
        sd = math.sqrt(sum((p - mean) ** 2 for p in pays) / (len(pays) - 1))
        half = 1.96 * sd / math.sqrt(len(pays))
    return cell.model_copy(
        update={
            "unit": "payoff",
            "score": mean,
            "low": None if half is None else mean - half,
            "high": None if half is None else mean + half,
        }
    )


class CwmReport:
    """One run of `spielbus paper cwm`: model folders per game, then the requested cells."""

    def __init__(self, args: argparse.Namespace, out: Path, console: Console) -> None:
        self.args, self.out, self.console = args, out, console
        self.sizes = SIZES[args.scale]
        self.llm = llm_of(args)
        spec = synthesis_llm(args.llm, getattr(args, "llm_config", None))
        self.synthesis = (
            None
            if spec is None
            else Synthesis(
                llm=spec[0], config=spec[1], model=self.llm["model"], syntheses=self.sizes.syntheses,
                budget=self.sizes.budget, trajectories=5, values=0 if args.scale == "quick" else 3,
            )
        )  # fmt: skip
        self.models: dict[str, Models] = {}
        self.numbers = paper_numbers("cwm")

    async def _models(self, key: str) -> Models:
        if key not in self.models:
            self.console.print(f"cwm: model folders of {key}")
            self.models[key] = await model_folders(self.out, key, GAMES[key], self.synthesis)
        return self.models[key]

    def _title(self, name: str, reference: bool = False) -> str:
        title = self.numbers[name].title if name in self.numbers else name
        return f"{title} ({REFERENCE})" if reference else title

    def _cell(self, name: str, reference: bool = False, **kw: Any) -> Cell:
        return Cell(name=name, title=self._title(name, reference), **kw)

    async def accuracy(self, name: str) -> Cell:
        """A Table 1 cell: the mean over the game's model folders (pooled tests for an interval)."""
        key, metric = _split(name)
        models = await self._models(key)
        if not models.folders:
            return self._cell(name, why=models.why)
        if models.reference and metric in SYNTHESIS_METRICS:
            why = f"the reference model is hand-written, not synthesized; {NEEDS_CODE_MODEL}"
            return self._cell(name, why=why)
        model = "reference (hand-written)" if models.reference else self.llm["model"]
        common: dict[str, Any] = {
            "reference": models.reference,
            "run": f"models/{key}",
            "model": model,
            "seed": EVAL_SEED,
            "note": "model folders " + ", ".join(models.folders) + " (eval.json beside each)",
        }
        if metric == "llm_calls":
            calls = [float(report_of(self.out, f).get("llm_calls") or 0) for f in models.folders]
            return self._cell(name, unit="calls", score=sum(calls) / len(calls), games=len(calls), **common)
        done = total = 0.0
        for folder in models.folders:
            acc, n = await self._metric(folder, metric)
            if acc is None:
                continue
            done, total = done + acc * n, total + n
        if not total:
            why = f"no {metric.replace('_', ' ')} cases in {key}'s model folders"
            return self._cell(name, why=why, **common)
        low, high = wilson(done, int(total))
        return self._cell(
            name, unit="accuracy", score=done / total, low=low, high=high, games=int(total), **common
        )

    async def _metric(self, folder: str, metric: str) -> tuple[float | None, int]:
        """(accuracy, tests) of one folder; a synthesis that wrote no code scores 0 on its tests (an
        older report.json said None for it)."""
        if metric.startswith("train"):
            rep = report_of(self.out, folder)
            acc, n = rep.get(f"{metric}_accuracy"), int(rep.get("train_tests") or 0)
            if acc is None and folder != folder_path(folder) and n:
                acc = 0.0
            return acc, n
        row = await evaluation(
            self.out, folder, self.sizes.eval_games, self.sizes.eval_transitions, EVAL_SEED
        )
        n = row["test_transitions"] if metric == "test_transition" else row["test_inference_cases"]
        return row.get(f"{metric}_accuracy"), int(n)

    async def play(self, name: str) -> Cell:
        """A Figure 2/3 cell: a tournament of cwm against the opponent."""
        key, opponent = _split(name)
        models = await self._models(key)
        if not models.playable:
            why = models.why or f"no synthesis of {key} wrote code ({', '.join(models.folders)})"
            return self._cell(name, agent="cwm", opponent=opponent, why=why)
        folder = best_folder(self.out, models.playable)
        cfg = play_config(
            key, str((self.out / folder).resolve()), opponent, self.sizes, self.llm, self.args.games
        )
        model = "reference (hand-written)" if models.reference else self.llm["model"]
        if opponent == "llm_policy":
            model += f"; llm_policy on {self.llm['model']}"
        cell = await measure(
            self.out,
            name,
            self._title(name, models.reference),
            cfg,
            "cwm",
            opponent,
            model,
            self.args.resume,
            self.console,
        )
        cell = cell.model_copy(update={"note": " ".join(x for x in (f"cwm plays {folder}.", cell.note) if x)})
        return _payoff_cell(self.out, cell) if key in PAYOFF_GAMES and cell.score is not None else cell

    async def run(self, names: list[str] | None = None) -> list[Cell]:
        """The cells `names` (default: those of `args.table`), each measured once (kept on --resume)."""
        names = names or cells_of("cwm", TABLES, self.args.table, getattr(self.args, "cells", None))
        done = read_cells(self.out) if self.args.resume else {}
        try:
            check_available()
        except SandboxUnavailable as exc:
            why = f"no sandbox for model code here: {exc}"
            for n in names:  # finished cells are kept (--resume), as below
                if n not in done or done[n].score is None:
                    done[n] = self._cell(n, why=why)
            write_cells(self.out, done)
            return [done[n] for n in names]
        for name in names:
            if name in done and done[name].score is not None:
                continue
            done[name] = await (self.play(name) if "-vs-" in name else self.accuracy(name))
            write_cells(self.out, done)  # after every cell, so that --resume keeps it
        return [done[n] for n in names]


async def run(args: argparse.Namespace, out: Path, console: Console) -> list[Cell]:
    """Measure the cells of `args.table` (default: every table) into the report folder `out`."""
    return await CwmReport(args, out, console).run()


def _curve(attempts: list[dict[str, Any]], field: str) -> list[float]:
    """Best-so-far accuracy after each LLM call (a call without a candidate keeps the last value)."""
    best, points = 0.0, []
    by_call = {int(a["call"]): a.get(field) for a in attempts}
    for call in range(1, max(by_call, default=0) + 1):
        v = by_call.get(call)
        if isinstance(v, int | float):
            best = max(best, float(v))
        points.append(best)
    return points


def calls_curves(out: Path) -> dict[str, dict[str, list[float]]]:
    """Per game with synthesized models: the mean best-so-far transition / inference accuracy per call."""
    curves: dict[str, dict[str, list[float]]] = {}
    for key in GAMES:
        reports = [
            json.loads(p.read_text()) for p in sorted((out / "models" / key).glob("synth-*/report.json"))
        ]
        if not reports:
            continue
        curves[key] = {}
        for field in ("transition_accuracy", "inference_accuracy"):
            runs = [_curve(r.get("attempts", []), field) for r in reports]
            length = max((len(c) for c in runs), default=0)
            if length == 0 or not any(any(c) for c in runs):
                continue
            padded = [c + [c[-1] if c else 0.0] * (length - len(c)) for c in runs]
            curves[key][field] = [sum(col) / len(col) for col in zip(*padded, strict=True)]
    return curves


def extra(out: Path, cells: list[Cell]) -> list[str]:
    """report.md's CWM part: the accuracy-against-LLM-calls plot (or why there is none)."""
    curves = calls_curves(out)
    (out / "cwm_calls.json").write_text(json.dumps(curves, indent=1) + "\n")
    if not any(curves.values()):
        return ["## Accuracy against LLM calls", "", f"Not measured: {NEEDS_CODE_MODEL}."]
    import matplotlib

    matplotlib.use("Agg")  # no display here
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 3.4))
    for key, fields in curves.items():
        for field, ys in fields.items():
            style = "-" if field.startswith("transition") else "--"
            ax.plot(range(1, len(ys) + 1), ys, style, label=f"{key} {field.split('_')[0]}")
    ax.set_xlabel("LLM calls")
    ax.set_ylabel("train accuracy of the best model")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=7)
    fig.tight_layout()
    for suffix in ("png", "svg"):
        fig.savefig(out / f"cwm_calls.{suffix}")
    plt.close(fig)
    return [
        "## Accuracy against LLM calls (the paper's Figure 1)",
        "",
        "Mean over the syntheses of the best candidate's train accuracy after each LLM call "
        "(solid: transition, dashed: inference); data in `cwm_calls.json`.",
        "",
        "![accuracy against LLM calls](cwm_calls.png)",
    ]
