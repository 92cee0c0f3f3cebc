"""`spielbus selfplay ...` (= `python -m research.coach ...`): the self-play and coach pipeline.

    collect GAME --policy SPEC --nodes N --rollouts R --out DIR   node dataset (resumable)
    coach DIR --llm NAME [--batch 15]                             the LLM Coach's policies + report
    export DIR --format trl|verl|jsonl [--source coach|reference]  prompt/reference pairs for RL
    solve GAME --iterations N --out FILE                          a CFVFP table for small games
    train EXPORT.jsonl --out DIR [--steps N]                      GRPO + LoRA on an export (resumable)
    table1 DIR --out OUT [--steps N] [--games-per-pairing N]      the paper's Table 1: base vs distilled

Exit codes: 0 done, 1 runtime failure (LLM unreachable), 2 bad input (arguments, a dataset
that is truncated, malformed or of another game: the message names the file and line),
130 interrupted (run the same command again to resume).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

if TYPE_CHECKING:
    import pyspiel

    from research.coach.train import TrainSettings

PROG = "spielbus selfplay"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    c = sub.add_parser("collect", help="self-play node dataset: rollout Q-values and CFVFP references")
    c.add_argument("game", help="game spec, e.g. simplified_holdem or kuhn_poker(players=3)")
    c.add_argument(
        "--policy",
        required=True,
        metavar="AGENT_SPEC",
        help="behaviour policy: random | first | cfvfp(iterations=N) | policy_table(table=DIR,source=...) "
        "| llm_policy:{JSON options} (any KIND:{JSON} or KIND(key=value,...))",
    )
    c.add_argument(
        "--nodes", type=int, required=True, help="nodes to collect (in total, counting a resumed run)"
    )
    c.add_argument("--rollouts", type=int, default=100, help="rollouts per legal action (default 100)")
    c.add_argument("--out", required=True, help="dataset folder (created; an existing one is resumed)")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--alpha", type=float, default=0.1, help="eq. 10 step size (default 0.1, the paper's)")
    c.add_argument("--sample", type=float, default=0.25, help="probability of sampling a decision node")
    c.add_argument("--workers", type=int, default=None, help="rollout processes (default: one per core)")
    c.add_argument("--quiet", action="store_true", help="no progress bar")

    k = sub.add_parser("coach", help="the LLM Coach: classify nodes, analyse, refine their policies")
    k.add_argument("dir", help="a `collect` folder")
    k.add_argument(
        "--llm",
        required=True,
        metavar="NAME",
        help="embedded (start SmolLM2 here), a model name on $OPENAI_BASE_URL / --base-url, "
        "or a JSON LLM config",
    )
    k.add_argument("--base-url", default=None, help="OpenAI-compatible server for --llm MODEL")
    k.add_argument("--batch", type=int, default=15, help="nodes per coach request (default 15, the paper's)")
    k.add_argument("--max-tokens", type=int, default=2048, help="completion budget per request")
    k.add_argument("--limit", type=int, default=None, help="coach at most this many nodes")
    _server_timeout_flag(k)
    k.add_argument("--quiet", action="store_true")

    e = sub.add_parser("export", help="prompt/reference pairs for an RL trainer (GRPO)")
    e.add_argument("dir")
    e.add_argument("--format", choices=["trl", "verl", "jsonl"], default="jsonl")
    e.add_argument("--source", choices=["coach", "reference"], default="coach")
    e.add_argument("--out", default=None, help="output file (default DIR/export-SOURCE-FORMAT.jsonl)")

    s = sub.add_parser("solve", help="a CFVFP table (average policy) for a small game")
    s.add_argument("game")
    s.add_argument("--iterations", type=int, default=1000)
    s.add_argument("--out", required=True, help="JSONL table file (policy_table source=policy)")
    s.add_argument("--exploitability", action="store_true", help="also print OpenSpiel's exploitability")
    t = sub.add_parser(
        "train",
        help="GRPO (TRL) + LoRA (PEFT) on a `--format trl` export, eq. 15 reward; writes DIR/model.gguf",
        description="Fine-tunes SmolLM2-135M-Instruct (the embedded model) on an export with TRL's GRPO "
        "and a LoRA adapter on CPU; needs the `train` extra. Writes DIR/model.gguf, which "
        "`spielbus llm serve --model DIR/model.gguf` serves to an ordinary llm_policy agent. "
        "Run the same command again to resume from the last checkpoint.",
    )
    t.add_argument("export", help="a `spielbus selfplay export --format trl` file")
    t.add_argument("--out", required=True, help="output folder (created; an existing one is resumed)")
    t.add_argument("--base", type=Path, default=None, help="base GGUF (default: the embedded SmolLM2)")
    t.add_argument("--quiet", action="store_true", help="no progress bar")
    _train_flags(t)

    t1 = sub.add_parser(
        "table1",
        help="the paper's Table 1: train on the CFVFP and coach targets, then base vs both by Elo",
        description="Exports DIR's CFVFP references and coach policies, trains a model on each "
        "(`train`), serves the base and both GGUFs and plays a round robin with a CFVFP table "
        "as yardstick (`spielbus run`); prints Elo beside Bradley-Terry and the paper's numbers. "
        "Resumable: run the same command again.",
    )
    t1.add_argument("dir", help="a `collect` folder that `coach` has coached")
    t1.add_argument("--out", required=True, help="output folder (models, tournament, table1.md)")
    t1.add_argument("--games-per-pairing", type=int, default=10)
    t1.add_argument("--solve-iterations", type=int, default=1000, help="CFVFP iterations of the yardstick")
    t1.add_argument("--quiet", action="store_true")
    t1.add_argument(
        "--rescore",
        action="store_true",
        help="no training or play: the table again from OUT's last finished tournament (its records "
        "and trainings), e.g. for the dominated-move columns of a run made before they existed",
    )
    _server_timeout_flag(t1)
    _train_flags(t1)
    return p


def _server_timeout_flag(p: argparse.ArgumentParser) -> None:
    from research.coach.coach import SERVER_TIMEOUT_S

    p.add_argument(
        "--server-timeout",
        type=float,
        default=SERVER_TIMEOUT_S,
        help="seconds to wait for an embedded llama.cpp server to answer; it is polled for readiness "
        f"and fails at once if it dies (default {SERVER_TIMEOUT_S:.0f}: a loaded machine needs minutes)",
    )


def _train_flags(p: argparse.ArgumentParser) -> None:
    """The training settings `train` and `table1` share."""
    from research.coach.train import TARGETS as TRAIN_TARGETS  # light: torch and TRL load in train()

    p.add_argument(
        "--steps", type=int, default=50, help="training steps in all (default 50, the paper's per round)"
    )
    p.add_argument("--prompts", type=int, default=2, help="prompts per step (default 2)")
    p.add_argument("--group", type=int, default=4, help="GRPO group: answers per prompt (default 4)")
    p.add_argument("--lr", type=float, default=5e-5, help="learning rate (default 5e-5)")
    p.add_argument("--lora-r", type=int, default=8, help="LoRA rank (default 8)")
    p.add_argument("--lora-alpha", type=int, default=16)
    p.add_argument(
        "--targets",
        default=",".join(TRAIN_TARGETS),
        help=f"projections with LoRA (default {','.join(TRAIN_TARGETS)})",
    )
    p.add_argument("--max-completion", type=int, default=24, help="tokens per answer (default 24)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--beta", type=float, default=0.0, help="KL weight (default 0)")
    p.add_argument("--save-every", type=int, default=10, help="checkpoint every N steps (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1, help="torch threads (default 1: the machine is shared)")
    p.add_argument(
        "--sums",
        choices=["strict", "renormalise"],
        default="strict",
        help="strict (default, eq. 15 as the paper states it): an answer is a distribution only if it "
        "sums to 1 (within 0.01); renormalise: any k non-negative numbers with a positive sum, "
        "scaled to 1 as the arena's llm_policy agent plays them",
    )
    p.add_argument(
        "--no-constrain",
        action="store_true",
        help="sample answers freely (default: only digits, '.', ',', ' ' and ']', ending at the ']', "
        "as the arena's agent answers under its JSON schema)",
    )


def _progress(quiet: bool, label: str) -> Progress | None:
    if quiet:
        return None
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(stderr=True),
    )


def _cmd_collect(args: argparse.Namespace) -> int:
    from research.coach.collect import collect

    bar = _progress(args.quiet, "nodes")
    task = None

    def progress(done: int, total: int) -> None:
        nonlocal task
        if bar is None:
            return
        if task is None:
            task = bar.add_task("collect", total=total)
        bar.update(task, completed=done)

    if bar:
        bar.start()
    try:
        result = collect(
            args.game,
            args.policy,
            Path(args.out),
            nodes=args.nodes,
            rollouts=args.rollouts,
            seed=args.seed,
            alpha=args.alpha,
            sample=args.sample,
            workers=args.workers,
            progress=progress,
        )
    finally:
        if bar:
            bar.stop()
    print(
        f"{args.out}: {result.written} new nodes in {result.seconds:.1f}s ({result.rate:.2f} nodes/s), "
        f"{result.skipped} already there"
    )
    if result.llm:
        print("LLM usage: " + ", ".join(f"{k} {v}" for k, v in result.llm.items()))
    return 0


def _cmd_coach(args: argparse.Namespace) -> int:
    from research.coach.coach import run_coach_cli

    return run_coach_cli(args)


def _cmd_export(args: argparse.Namespace) -> int:
    from research.coach.export import export

    out = Path(args.out) if args.out else Path(args.dir) / f"export-{args.source}-{args.format}.jsonl"
    n = export(Path(args.dir), out, fmt=args.format, source=args.source)
    print(f"wrote {n} rows to {out}")
    return 0


def _cmd_solve(args: argparse.Namespace) -> int:
    from agents.policy_dataset import TableRow
    from bus.protocol import LegalAction
    from games.loader import load_game, parse_spec
    from research.coach.cfvfp import CFVFPSolver, exploitability

    spec = parse_spec(args.game)
    game = load_game(spec)
    solver = CFVFPSolver(game)
    solver.iterate(args.iterations)
    table = solver.average_policy()
    names = _action_names(game, solver)
    with open(args.out, "w", encoding="utf-8") as fh:
        for key, probs in table.items():
            acts = sorted(probs)
            row = TableRow(
                game=spec.label(),
                infoset=key,
                legal=[LegalAction(id=a, text=names.get((key, a), str(a))) for a in acts],
                policy=[probs[a] for a in acts],
            )
            fh.write(row.model_dump_json() + "\n")
    print(f"wrote {len(table)} information sets to {args.out}")
    if args.exploitability:
        print(f"exploitability (OpenSpiel): {exploitability(game, table):.6f}")
    return 0


def _settings(args: argparse.Namespace) -> TrainSettings:
    from research.coach.train import TrainSettings

    settings = TrainSettings(
        steps=args.steps,
        prompts=args.prompts,
        group=args.group,
        learning_rate=args.lr,
        lora_r=args.lora_r,
        lora_alpha=args.lora_alpha,
        targets=tuple(t.strip() for t in args.targets.split(",") if t.strip()),
        max_completion=args.max_completion,
        temperature=args.temperature,
        beta=args.beta,
        save_every=args.save_every,
        seed=args.seed,
        threads=args.threads,
        strict_sum=args.sums == "strict",
        constrain=not args.no_constrain,
    )
    settings.check()
    return settings


def _cmd_train(args: argparse.Namespace) -> int:
    from research.coach.train import TrainError, train

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"{PROG} train: {exc}", file=sys.stderr)
        return 2
    try:
        result = train(
            Path(args.export), Path(args.out), settings, base_gguf=args.base, progress=not args.quiet
        )
    except TrainError as exc:
        print(f"{PROG} train: {exc}", file=sys.stderr)
        return 1
    per_step = sum(result.step_seconds) / len(result.step_seconds) if result.step_seconds else 0.0
    print(
        f"{args.out}: trained to step {result.steps} (resumed from {result.resumed_from}) in "
        f"{result.seconds:.0f}s, {per_step:.1f}s a step; mean reward first {_first(result.rewards)} "
        f"last {_last(result.rewards)}; model: {Path(args.out) / 'model.gguf'}"
    )
    return 0


def _cmd_table1(args: argparse.Namespace) -> int:
    from agents.policy_dataset import DatasetError
    from research.coach.table1 import render, rescore, table1
    from research.coach.train import TrainError

    if args.rescore:
        try:
            result = rescore(Path(args.dir), Path(args.out))
        except (RuntimeError, DatasetError, OSError) as exc:
            print(f"{PROG} table1: {exc}", file=sys.stderr)
            return 1
        print(render(result))
        print(f"\nwritten: {Path(args.out) / 'table1.md'}, {Path(args.out) / 'table1.json'}")
        return 0

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"{PROG} table1: {exc}", file=sys.stderr)
        return 2
    if args.games_per_pairing < 1 or args.solve_iterations < 1:
        print(
            f"{PROG} table1: --games-per-pairing and --solve-iterations must be at least 1", file=sys.stderr
        )
        return 2
    try:
        result = table1(
            Path(args.dir),
            Path(args.out),
            settings,
            games_per_pairing=args.games_per_pairing,
            solve_iterations=args.solve_iterations,
            seed=args.seed,
            progress=not args.quiet,
            server_timeout=args.server_timeout,
        )
    except TrainError as exc:
        print(f"{PROG} table1: {exc}", file=sys.stderr)
        return 1
    print(render(result))
    print(f"\nwritten: {Path(args.out) / 'table1.md'}, {Path(args.out) / 'table1.json'}")
    return 0


def _first(xs: list[float]) -> str:
    return f"{xs[0]:.3f}" if xs else "-"


def _last(xs: list[float]) -> str:
    return f"{xs[-1]:.3f}" if xs else "-"


def _action_names(game: pyspiel.Game, solver: object) -> dict[tuple[str, int], str]:
    """Action texts per information set, from one state of each set (found while walking the tree)."""
    out: dict[tuple[str, int], str] = {}
    stack = [game.new_initial_state()]
    while stack:
        s = stack.pop()
        if s.is_terminal():
            continue
        if s.is_chance_node():
            stack.extend(s.child(a) for a, _ in s.chance_outcomes())
            continue
        p = s.current_player()
        key = s.information_state_string(p)
        for a in s.legal_actions():
            if (key, a) not in out:
                out[(key, a)] = s.action_to_string(p, a)
            stack.append(s.child(a))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from agents.policy_dataset import DatasetError
    from games.loader import GameSpecError
    from research.coach.coach import CoachError
    from research.coach.collect import CollectError
    from research.coach.policies import PolicySpecError

    args = _parser().parse_args(list(sys.argv[1:] if argv is None else argv))
    handlers = {
        "collect": _cmd_collect,
        "coach": _cmd_coach,
        "export": _cmd_export,
        "solve": _cmd_solve,
        "train": _cmd_train,
        "table1": _cmd_table1,
    }
    try:
        return handlers[args.command](args)
    except PolicySpecError as exc:
        print(f"{PROG} {args.command}: --policy: {exc}", file=sys.stderr)
        return 2
    except (DatasetError, CollectError, GameSpecError, CoachError) as exc:
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 2
    except RuntimeError as exc:  # the embedded LLM server would not start (ServerError)
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG} {args.command}: interrupted; run the same command again to resume", file=sys.stderr)
        return 130
    except json.JSONDecodeError as exc:  # pragma: no cover - every reader names its line itself
        print(f"{PROG} {args.command}: {exc}", file=sys.stderr)
        return 2
