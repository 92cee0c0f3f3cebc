"""`spielbus cwm synthesize GAME ...` and `spielbus cwm eval DIR`.

synthesize: trajectories (random players through the real referee, or `--from-run` a run
folder's matches.jsonl), unit tests from them, LLM synthesis with refinement in the sandbox,
value-function candidates ranked by a tournament; writes DIR (see docs/cwm.md).
eval: held-out accuracy of DIR's model (transitions and inference) as a Table 1 row; with
--online RUN_DIR --agent NAME also the online columns (research.cwm.online).
reject: appendix F's tournament among several model folders of one game (research.cwm.reject).

Exit codes: 0 done, 1 the LLM server or sandbox failed at run time, 2 bad input (names the
flag, game or file) or no sandbox on this machine (one line: what to install or enable; the
model's code never runs without it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agents.cwm.model_dir import ModelDirError, load_meta
from agents.cwm.reference import REFERENCE

if TYPE_CHECKING:  # imported where used: `spielbus cwm eval` needs neither the LLM layer nor OpenSpiel
    import pyspiel

    from agents.llm import LLMConfig
    from agents.llm.server import EmbeddedServer
    from research.cwm.synthesize import Task

REFERENCE_GAMES = tuple(REFERENCE)  # game specs with a hand-written model (agents/cwm/reference)
DEFAULT_HELDOUT_GAMES = 100
DEFAULT_HELDOUT_TRANSITIONS = 10_000


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus cwm", description="Code world models: synthesize, evaluate.")
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("synthesize", help="have an LLM write GAME as code, refined against unit tests")
    s.add_argument("game", help="game name (e.g. tic_tac_toe, kuhn_poker)")
    s.add_argument(
        "--llm",
        required=True,
        help="'embedded' (SmolLM2 on llama.cpp), an OpenAI-compatible base URL, 'ollama:URL', "
        "or a NAME of an [llm.NAME] section of --config",
    )
    s.add_argument("--config", default=None, help="tournament file whose [llm.NAME] sections --llm may name")
    s.add_argument("--model", default=None, help="model name on the server")
    s.add_argument("--trajectories", type=int, default=5, help="training trajectories (default 5)")
    s.add_argument("--from-run", default=None, metavar="RUN_DIR", help="take trajectories from matches.jsonl")
    deck = s.add_mutually_exclusive_group()
    deck.add_argument("--open-deck", dest="closed_deck", action="store_false", help="(default)")
    deck.add_argument("--closed-deck", dest="closed_deck", action="store_true", help="no hidden information")
    s.set_defaults(closed_deck=False)  # open deck unless asked (store_false would default to True)
    s.add_argument(
        "--inference",
        choices=["history", "state"],
        default="history",
        help="imperfect information: resample_history (H.3/H.5, default) or resample_state (H.4, open deck)",
    )
    s.add_argument("--refine", choices=["conversation", "tree"], default="tree")
    s.add_argument("--budget", type=int, default=10, help="LLM calls for the model (default 10)")
    s.add_argument("--values", type=int, default=3, help="value-function candidates (0: none)")
    s.add_argument("--max-tokens", type=int, default=2048)
    s.add_argument("--tests-in-prompt", type=int, default=5, help="tests of each kind in the first prompt")
    s.add_argument("--temperature", type=float, default=0.7)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--out", required=True, help="output folder")
    r = sub.add_parser("reference", help="write the hand-written reference model of GAME as a model folder")
    r.add_argument("game", choices=sorted(REFERENCE_GAMES))
    r.add_argument("--out", required=True)
    j = sub.add_parser(
        "reject", help="appendix F: a tournament among model folders of one game rejects bad ones"
    )
    j.add_argument("dirs", nargs="+", help="model folders of one two-player game (the paper: 5 syntheses)")
    j.add_argument("--repeats", type=int, default=50, help="games per pairing and host (default 50)")
    j.add_argument("--simulations", type=int, default=100, help="(IS)MCTS simulations per move (default 100)")
    j.add_argument("--margin", type=float, default=0.1, help="share of the utility range (default 0.1)")
    j.add_argument("--seed", type=int, default=0)
    j.add_argument("--json", action="store_true", help="print the verdict as JSON")
    e = sub.add_parser("eval", help="held-out transition and inference accuracy of a synthesized model")
    e.add_argument("dir", help="a folder written by `spielbus cwm synthesize`")
    e.add_argument("--games", type=int, default=DEFAULT_HELDOUT_GAMES, help="held-out games (default 100)")
    e.add_argument(
        "--transitions",
        type=int,
        default=DEFAULT_HELDOUT_TRANSITIONS,
        help="transitions sampled (default 10000)",
    )
    e.add_argument("--seed", type=int, default=12345)
    e.add_argument(
        "--mcts-share", type=float, default=0.5, help="chance that a held-out player is MCTS on the true game"
    )
    e.add_argument(
        "--online",
        default=None,
        metavar="RUN_DIR",
        help="also the online columns: every step of the matches --agent played in this run folder",
    )
    e.add_argument(
        "--agent", default=None, help="the agent (its name in the run) whose matches --online reads"
    )
    e.add_argument("--json", action="store_true", help="print the row as JSON")
    return p


def _llm_config(args: argparse.Namespace) -> tuple[LLMConfig, EmbeddedServer | None]:
    from agents.llm import LLMConfig

    spec = args.llm
    server = None
    raw: dict[str, Any]
    if spec == "embedded":
        from agents.llm.server import EmbeddedServer

        # Threads: llama-cpp-python's default (half the cores); more stall each other on a busy machine.
        server = EmbeddedServer(n_ctx=8192)
        server.start()
        raw = {"base_url": server.base_url}
    elif spec.startswith(("http://", "https://")):
        raw = {"base_url": spec}
    elif spec.startswith("ollama:"):
        raw = {"backend": "ollama", "base_url": spec[len("ollama:") :]}
    else:
        if not args.config:
            raise ValueError(f"--llm {spec!r}: not 'embedded', a URL or 'ollama:URL'; a NAME needs --config")
        data = tomllib.loads(Path(args.config).read_text())
        section = data.get("llm", {}).get(spec)
        if not isinstance(section, dict):
            raise ValueError(f"{args.config}: no [llm.{spec}] section")
        raw = dict(section)
    if args.model:
        raw["model"] = args.model
    raw.setdefault("timeout_s", 600.0)
    return LLMConfig.model_validate(raw), server


def _synthesize(args: argparse.Namespace, console: Console) -> int:
    import pyspiel

    from agents.cwm.sandbox import SandboxUnavailable, check_available
    from games.loader import load_game
    from games.rules import rules_text
    from games.view import is_perfect_information
    from research.cwm import trajectories as T
    from research.cwm.model_files import write_model_dir
    from research.cwm.synthesize import Task

    for flag in ("trajectories", "budget"):
        if getattr(args, flag) < 1:
            _err(f"spielbus cwm: --{flag} must be at least 1")
            return 2
    try:
        game = load_game(args.game)
    except (pyspiel.SpielError, RuntimeError, ValueError) as exc:
        _err(f"spielbus cwm: unknown game {args.game!r}: {exc}")
        return 2
    try:
        check_available()
    except SandboxUnavailable as exc:
        _err(f"spielbus cwm: {exc}")
        return 2
    imperfect = not is_perfect_information(game)
    closed = bool(args.closed_deck) and imperfect
    if args.inference == "state" and closed:
        _err("spielbus cwm: --inference state is hidden-state inference with an open deck (appendix H.4)")
        return 2
    try:
        trajs = _training_trajectories(args, console)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        _err(f"spielbus cwm: {exc}")
        return 2
    tests = T.build_tests(game, trajs, closed, seed=args.seed, inference=args.inference)
    task = Task(
        game=args.game,
        rules=rules_text(game),
        imperfect=imperfect,
        closed_deck=closed,
        tests=tests,
        refine=args.refine,
        budget=args.budget,
        max_tokens=args.max_tokens,
        temperature=args.temperature,
        seed=args.seed,
        tests_on_init=max(1, args.tests_in_prompt),
        inference=args.inference,
    )
    try:
        config, server = _llm_config(args)
    except (ValueError, OSError, tomllib.TOMLDecodeError) as exc:
        _err(f"spielbus cwm: {exc}")
        return 2
    except Exception as exc:  # the embedded server failed to start
        _err(f"spielbus cwm: LLM server: {exc}")
        return 1
    try:
        out_dir = Path(args.out)
        report = asyncio.run(_run(task, config, game, trajs, args, console))
        write_model_dir(out_dir, task, report, game, trajs)
    finally:
        if server is not None:
            server.stop()
    r = report["report"]
    console.print(
        f"wrote {out_dir}: train transition accuracy {_fmt(r['train_transition_accuracy'])}, "
        f"train inference accuracy {_fmt(r['train_inference_accuracy'])}, LLM calls {r['llm_calls']}, "
        f"tokens {r['prompt_tokens']}+{r['completion_tokens']}",
        highlight=False,
    )
    return 0


def _training_trajectories(args: argparse.Namespace, console: Console) -> list[list[dict[str, Any]]]:
    """`--from-run RUN_DIR`'s finished matches of the game, else fresh ones recorded through the referee."""
    from research.cwm import trajectories as T

    if args.from_run:
        trajs = T.from_run_folder(args.from_run, args.game, args.trajectories)
        if not trajs:
            raise ValueError(f"{args.from_run}: no finished match of {args.game}")
        return trajs
    with tempfile.TemporaryDirectory(prefix="cwm-traj-") as tmp:
        console.print(
            f"recording {args.trajectories} trajectories of {args.game} (random vs random, referee)"
        )
        folder = _record(args.game, args.trajectories, args.seed, tmp)
        return T.from_run_folder(folder, args.game, args.trajectories)


def _record(game: str, count: int, seed: int, tmp: str) -> Path:
    """Random-vs-random matches through the real referee, recorded by `research.cwm.record` in its
    own process (it runs a tournament; agents never import spielbus); returns the run folder."""
    argv = [sys.executable, "-m", "research.cwm.record", game, "--count", str(count), "--seed", str(seed)]
    done = subprocess.run([*argv, "--run-dir", tmp], capture_output=True, text=True, check=False)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"recording trajectories failed: {done.stderr.strip()[-2000:]}")
    return Path(lines[-1])


def _err(msg: str) -> None:
    print(msg, file=sys.stderr)


def _fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.4f}"


async def _run(
    task: Task,
    config: LLMConfig,
    game: pyspiel.Game,
    trajs: list[list[dict[str, Any]]],
    args: argparse.Namespace,
    console: Console,
) -> dict[str, Any]:
    from agents.llm import LLMClient
    from research.cwm import trajectories as T
    from research.cwm.synthesize import report
    from research.cwm.values import ValueCandidate, check_and_rank, value_prompt

    client = LLMClient(config)
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as progress:
        bar = progress.add_task(f"synthesizing {task.game}", total=task.budget, status="")

        def tick(calls: int, att: Any) -> None:
            status = "LLM error" if att is None else (att.reason or f"{att.passed}/{att.total} tests")
            progress.update(bar, completed=calls, status=status)

        from research.cwm.synthesize import Synthesizer

        synth = Synthesizer(client, task, tick)
        out = await synth.run()
        progress.update(bar, completed=task.budget)
        values: list[ValueCandidate] = []
        chosen = None
        no_value_score = None
        if (
            args.values > 0
            and out.code is not None
            and out.run is not None
            and out.run.verdict.reason is None
        ):
            vbar = progress.add_task("value functions", total=args.values, status="")
            states = _value_states(trajs)
            prompt = value_prompt(task.game, task.rules, out.code, states)
            for i in range(args.values):
                text = await synth._ask([("user", prompt)])
                from research.cwm.prompts import extract_code

                code = extract_code(text or "")
                if code:
                    values.append(ValueCandidate(name=f"value_{i}", code=code))
                progress.update(vbar, completed=i + 1)
            if values:
                choice = check_and_rank(
                    out.code, values, states, T.initial_state(game), game.num_players(), seed=task.seed
                )
                chosen, no_value_score = choice.chosen, choice.no_value_score
    await client.aclose()
    rep = report(
        task,
        out,
        {
            "value_functions": [
                {"name": v.name, "ok": v.ok, "problem": v.problem, "tournament_score": v.score}
                for v in values
            ],
            "value_function": chosen,
            "no_value_function_score": no_value_score,
            "trajectories": len(trajs),
            "llm": config.label(),
        },
    )
    return {"report": rep, "code": out.code, "values": {v.name: v.code for v in values}}


def _value_states(trajs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    rng = random.Random(0)
    states = []
    for steps in trajs:
        states.append({"state": rng.choice(steps[:-1] or steps)["state"], "terminal_rewards": None})
        last = steps[-1]
        if last["current_player"] == -4:
            states.append({"state": last["state"], "terminal_rewards": last["rewards"]})
    return states


def _eval(args: argparse.Namespace, console: Console) -> int:
    from agents.cwm.sandbox import SandboxUnavailable, check_available
    from research.cwm.eval import evaluate

    folder = Path(args.dir)
    # A synthesis that wrote no code leaves its folder without model.py: it is scored (0), not refused.
    no_code = folder.is_dir() and not (folder / "model.py").exists() and (folder / "report.json").is_file()
    try:
        meta = load_meta(folder, need_model=not no_code)
    except ModelDirError as exc:
        _err(f"spielbus cwm: {exc}")
        return 2
    if args.games < 1 or args.transitions < 1:
        _err("spielbus cwm: --games and --transitions must be at least 1")
        return 2
    if not 0.0 <= args.mcts_share <= 1.0:
        _err("spielbus cwm: --mcts-share must be between 0 and 1")
        return 2
    if (args.online is None) != (args.agent is None):
        _err("spielbus cwm: --online RUN_DIR and --agent NAME go together")
        return 2
    if args.online is not None and no_code:
        _err(f"spielbus cwm: {folder / 'model.py'}: missing (no code to replay online)")
        return 2
    if args.online is not None and not (Path(args.online) / "matches.jsonl").is_file():
        _err(
            f"spielbus cwm: {Path(args.online) / 'matches.jsonl'}: no such file (--online names a run folder)"
        )
        return 2
    try:
        check_available()
    except SandboxUnavailable as exc:
        _err(f"spielbus cwm: {exc}")
        return 2
    row = evaluate(
        Path(args.dir), meta, games=args.games, transitions=args.transitions, seed=args.seed,
        mcts_share=args.mcts_share,
    )  # fmt: skip
    if args.online is not None:
        from research.cwm.online import online_accuracy

        row.update(online_accuracy(Path(args.dir), meta, Path(args.online), args.agent, seed=args.seed))
    if args.json:
        print(json.dumps(row))
        return 0
    from rich.table import Table

    table = Table(title=f"Code world model of {meta['game']} ({row['deck']} deck)")
    online = args.online is not None
    cols = ["Game", "transition train", "transition test", "transition online"][: 4 if online else 3]
    cols += ["inference train", "inference test", "inference online"][: 3 if online else 2]
    for col in [*cols, "# LLM calls"]:
        table.add_column(col, no_wrap=col == "Game")
    cells = [meta["game"], _fmt(row["train_transition_accuracy"]), _fmt(row["test_transition_accuracy"])]
    if online:
        cells.append(_fmt(row["online_transition_accuracy"]))
    cells += [_fmt(row["train_inference_accuracy"]), _fmt(row["test_inference_accuracy"])]
    if online:
        cells.append(_fmt(row["online_inference_accuracy"]))
    table.add_row(*cells, str(row["llm_calls"]))
    console.print(table)
    console.print(
        f"held out: {row['test_transitions']} transitions from {row['test_games']} games "
        f"(MCTS on the true game played {row['test_mcts_share']:.0%} of the seats, asked for "
        f"{row['test_mcts_share_asked']:g}; the others random), "
        f"{row['test_inference_cases']} inference cases"
        + (f"; failure: {row['failure']}" if row.get("failure") else ""),
        highlight=False,
    )
    if online:
        console.print(
            f"online: {row['online_transitions']} transitions and {row['online_inference_cases']} inference "
            f"cases from the {row['online_matches']} matches {args.agent} played in {args.online}"
            + (f"; failure: {row['online_failure']}" if row.get("online_failure") else ""),
            highlight=False,
        )
    return 0


def _reject(args: argparse.Namespace, console: Console) -> int:
    from agents.cwm.sandbox import SandboxUnavailable, check_available
    from research.cwm.reject import reject_bad_models

    if len(args.dirs) < 2 or args.repeats < 1 or args.simulations < 1 or not 0 <= args.margin <= 1:
        _err("spielbus cwm reject: two or more folders; --repeats, --simulations at least 1; --margin 0 to 1")
        return 2
    try:
        for d in args.dirs:
            load_meta(Path(d))
        check_available()
        verdict = reject_bad_models(
            [Path(d) for d in args.dirs], repeats=args.repeats, simulations=args.simulations,
            margin=args.margin, seed=args.seed,
        )  # fmt: skip
    except (ModelDirError, SandboxUnavailable, ValueError) as exc:
        _err(f"spielbus cwm reject: {exc}")
        return 2
    rows = [
        {"dir": str(e.folder), "mean_payoff": round(e.mean, 4), "games": len(e.payoffs),
         "failures": e.failures, "rejected": e.rejected}
        for e in verdict.entrants
    ]  # fmt: skip
    if args.json:
        print(json.dumps({"entrants": rows, "best": verdict.best, "utility_range": verdict.utility_range,
                          "threshold": verdict.threshold}))  # fmt: skip
        return 0
    for row in rows:
        mark = "rejected" if row["rejected"] else "kept"
        console.print(f"{mark:9} {row['dir']}  mean {row['mean_payoff']:+.4f}  "
                      f"({row['games']} games, {row['failures']} failed)", highlight=False)  # fmt: skip
    console.print(f"threshold {verdict.threshold:+.4f} (best {verdict.best:+.4f} minus {args.margin:g} "
                  f"of the observed range {verdict.utility_range:g})", highlight=False)  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=False)
    if args.command == "synthesize":
        return _synthesize(args, console)
    if args.command == "reject":
        return _reject(args, console)
    if args.command == "reference":
        from research.cwm.model_files import write_reference_dir

        write_reference_dir(Path(args.out), args.game)
        console.print(f"wrote {args.out}: the hand-written reference model of {args.game} (not synthesized)")
        return 0
    return _eval(args, console)


if __name__ == "__main__":
    sys.exit(main())
