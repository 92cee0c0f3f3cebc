"""`spielbus puzzles AGENT_SPEC... [--depth 3..8] [--count N]`: the mate-in-N suite through the referee.

Every puzzle is a real match: OpenSpiel chess from the puzzle's FEN (the `fen`
game parameter), the agent attacking, the defender Stockfish at full strength
(skill 20) with a fixed node budget per move (`--defender-nodes`, 250,000), so
that a puzzle is equally hard on any machine and under any load. The tournament
is built programmatically (a gauntlet with the defender as the only champion)
and played by `spielbus.run.run_tournament`, so agents start, fail and are
recorded exactly as in `spielbus run`, and the run folder holds every match
(plus `puzzles.json`, the per-puzzle verdicts).

Solved means the attacker delivers checkmate within N of its own moves; anything
else (a slower mate, no mate, a forfeit) is unsolved. Matches are capped at 2N-1
turns of the deepest depth asked.

AGENT_SPEC is `[LABEL=]KIND[:KEY=VALUE,...]`, e.g. `mcts:simulations=50`,
`sf1=stockfish:skill_level=1,movetime_ms=50`, `llm_policy:mode=vote`. Values are
read as JSON where they parse (numbers, true/false, quoted strings), else as text.
The label (default: the kind and the values, joined by '-') names the column.

Limits: the gauntlet seats the challenger first, which in OpenSpiel's chess is
black, so a puzzle with white to move is played colour-mirrored (ranks flipped,
colours swapped: the same mate in N). An LLM agent therefore always sees itself
as black. Printed like Table 2 of the LLM-MCTS paper, "Can Large Language Models Play Games?".
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from typing import Any

import chess
from rich.console import Console
from rich.table import Table

from bus import loop as bus_loop
from bus.protocol import GameSpec, MatchRecord
from games.chess.puzzles import DEPTHS, Puzzle, PuzzleError, load_puzzles, select
from referee.config import AgentConfig, ConfigError, TournamentConfig

DEFENDER = "defender"
# The defender's work per move: fixed nodes, so a puzzle is as hard on a busy machine as on an idle
# one (about 0.25 s of one core here; a time limit made it weaker under load).
DEFENDER_NODES = 250_000
_LABEL_RE = re.compile(r"^[A-Za-z0-9_-]+$")


@dataclass(frozen=True)
class AgentSpec:
    label: str
    kind: str
    options: dict[str, Any]


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_agent_spec(text: str) -> AgentSpec:
    """`[LABEL=]KIND[:KEY=VALUE,...]` -> AgentSpec; ValueError naming the problem."""
    label: str | None = None
    head, sep, opts = text.partition(":")
    if "=" in head:
        label, _, head = head.partition("=")
    kind = head.strip()
    if not _LABEL_RE.match(kind):
        raise ValueError(f"agent spec {text!r}: {kind!r} is not an agent kind")
    options: dict[str, Any] = {}
    if sep:
        for part in opts.split(","):
            key, eq, value = part.partition("=")
            if not eq or not key.strip():
                raise ValueError(f"agent spec {text!r}: {part!r} is not KEY=VALUE")
            options[key.strip()] = _value(value.strip())
    if label is None:
        label = "-".join([kind, *(re.sub(r"[^A-Za-z0-9_]", "", str(v)) for v in options.values())])
    if not _LABEL_RE.match(label) or label == DEFENDER:
        raise ValueError(
            f"agent spec {text!r}: label {label!r} must be letters, digits, '_' or '-', not {DEFENDER!r}"
        )
    return AgentSpec(label=label, kind=kind, options=options)


def match_fen(p: Puzzle) -> str:
    """The FEN the match starts from: black (the challenger's seat) to move, mirrored if need be."""
    board = chess.Board(p.fen)
    return (board.mirror() if board.turn == chess.WHITE else board).fen()


def build_config(
    agents: list[AgentSpec],
    puzzles: list[Puzzle],
    *,
    defender_nodes: int | None = DEFENDER_NODES,
    defender_depth: int | None = None,
    defender_movetime_ms: int | None = None,
    deadline_ms: int = 120_000,
    concurrency: int = 2,
    run_dir: str = "runs",
    seed: int = 0,
) -> TournamentConfig:
    if not puzzles:
        raise ConfigError("no puzzles selected")
    labels = [a.label for a in agents]
    if len(set(labels)) != len(labels):
        raise ConfigError(f"two agents share a label: {labels}; name them with LABEL=KIND")
    games, seen = [], set()
    for p in puzzles:
        fen = match_fen(p)
        if fen not in seen:
            seen.add(fen)
            games.append(GameSpec(name="chess", params={"fen": fen}))
    cfg_agents = {a.label: AgentConfig(kind=a.kind, options=a.options) for a in agents}
    limits = {"nodes": defender_nodes, "depth": defender_depth, "movetime_ms": defender_movetime_ms}
    if not any(limits.values()):
        raise ConfigError("the defender needs a limit: nodes, depth or movetime")
    defender = {"skill_level": 20, **{k: v for k, v in limits.items() if v}}
    cfg_agents[DEFENDER] = AgentConfig(kind="stockfish", options=defender)
    return TournamentConfig(
        name="puzzles",
        format="gauntlet",
        champions=[DEFENDER],
        games=games,
        agents=cfg_agents,
        games_per_pairing=1,
        both_seat_orders=False,
        concurrency=concurrency,
        deadline_ms=deadline_ms,
        max_turns=2 * max(p.depth for p in puzzles) - 1,
        seed=seed,
        run_dir=run_dir,
    )


def solved(record: MatchRecord, depth: int) -> bool:
    """The attacker (seat 0) mated within `depth` of its own moves."""
    if record.outcome != "decisive" or not record.returns or record.returns[0] <= 0:
        return False
    return sum(1 for m in record.moves if m.player == 0) <= depth


def score(records: list[MatchRecord], puzzles: list[Puzzle]) -> dict[str, dict[str, bool]]:
    """agent label -> puzzle id -> solved. A puzzle whose match has no record has no entry."""
    by_fen: dict[str, list[Puzzle]] = {}
    for p in puzzles:
        by_fen.setdefault(match_fen(p), []).append(p)
    out: dict[str, dict[str, bool]] = {}
    for rec in records:
        attacker = rec.seats[0]
        for p in by_fen.get(str(rec.game.params.get("fen")), []):
            out.setdefault(attacker, {})[p.id] = solved(rec, p.depth)
    return out


def table2(results: dict[str, dict[str, bool]], puzzles: list[Puzzle], labels: list[str]) -> Table:
    t = Table(title="Mate-in-N puzzles solved (Table 2 of the LLM-MCTS paper)")
    t.add_column("depth", justify="right")
    for label in labels:
        t.add_column(label, justify="right")
    for d in sorted({p.depth for p in puzzles}):
        ids = [p.id for p in puzzles if p.depth == d]
        cells = []
        for label in labels:
            verdicts = [results[label][i] for i in ids if i in results.get(label, {})]
            k, n = sum(verdicts), len(verdicts)
            # A puzzle whose match has no record (the run was cut short) is not played, not failed.
            share = f"{100 * k / n:.0f}%" if n else "-"
            cells.append(f"{share} ({k}/{n})" + (f", {len(ids) - n} not played" if n < len(ids) else ""))
        t.add_row(str(d), *cells)
    return t


def _depths(text: str) -> list[int]:
    m = re.fullmatch(r"\s*(\d+)\s*(?:(?:\.\.|-)\s*(\d+))?\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N or LO..HI")
    lo, hi = int(m.group(1)), int(m.group(2) or m.group(1))
    if not (DEPTHS.start <= lo <= hi < DEPTHS.stop):
        raise argparse.ArgumentTypeError(f"{text!r}: depths are {DEPTHS.start}..{DEPTHS.stop - 1}")
    return list(range(lo, hi + 1))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spielbus puzzles",
        description="Mate-in-N chess puzzles, each a match through the referee against Stockfish "
        "(full strength); prints the solved share per depth and agent.",
        epilog="AGENT_SPEC: [LABEL=]KIND[:KEY=VALUE,...], e.g. mcts:simulations=50 "
        "or sf1=stockfish:skill_level=1. Values are JSON where they parse.",
    )
    p.add_argument("agents", nargs="+", metavar="AGENT_SPEC")
    p.add_argument("--depth", type=_depths, default=list(DEPTHS), help="N or LO..HI (default 3..8)")
    p.add_argument("--count", type=int, default=None, help="puzzles per depth (default: all)")
    p.add_argument("--puzzles", default=None, help="puzzle file (default: the shipped suite)")
    p.add_argument("--deadline-ms", type=int, default=120_000, help="per move (default 120000)")
    p.add_argument(
        "--defender-nodes",
        type=int,
        default=DEFENDER_NODES,
        help=f"the defender's nodes per move (default {DEFENDER_NODES}; 0: no node limit)",
    )
    p.add_argument("--defender-depth", type=int, default=None, help="the defender's depth limit (plies)")
    p.add_argument(
        "--defender-movetime-ms",
        type=int,
        default=None,
        help="the defender's time per move (machine-dependent)",
    )
    p.add_argument("--concurrency", type=int, default=2, help="matches at once (default 2)")
    p.add_argument("--run-dir", default="runs")
    p.add_argument("--nats", default=None, help="use this NATS server (default: embedded)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument(
        "--deadline",
        type=float,
        default=None,
        metavar="SECONDS",
        help="stop after this long and score the matches played (default: none)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    try:
        specs = [parse_agent_spec(a) for a in args.agents]
        if args.count is not None and args.count < 1:
            raise ValueError("--count must be at least 1")
        puzzles = select(load_puzzles(args.puzzles), args.depth, args.count)
        config = build_config(
            specs,
            puzzles,
            defender_nodes=args.defender_nodes or None,
            defender_depth=args.defender_depth,
            defender_movetime_ms=args.defender_movetime_ms,
            deadline_ms=args.deadline_ms,
            concurrency=args.concurrency,
            run_dir=args.run_dir,
        )
        from spielbus.launch import check_agent_options

        problems = check_agent_options(
            {n: (a.kind, a.options) for n, a in config.agents.items()}, [g.name for g in config.games]
        )
        if problems:
            raise ConfigError("bad agent options:\n  " + "\n  ".join(problems))
    except (ValueError, PuzzleError) as exc:  # ConfigError is a ValueError
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    missing = [d for d in args.depth if not any(p.depth == d for p in puzzles)]
    if missing:
        console.print(f"[yellow]note:[/yellow] no puzzles of depth {missing} in the suite", highlight=False)
    from referee.collector import DEFAULT_IDLE_S
    from spielbus.run import RunOptions, run_tournament

    # One move may take the whole turn deadline: the run's no-progress limit must be longer.
    idle_s = max(DEFAULT_IDLE_S, 2 * args.deadline_ms / 1000 + 60)
    opts = RunOptions(
        nats=args.nats, run_dir=args.run_dir, quiet=args.quiet, deadline_s=args.deadline, idle_s=idle_s
    )
    try:
        result = bus_loop.run(run_tournament(config, opts, console))
    except (ConnectionError, RuntimeError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 1
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: the run folder keeps every finished match[/yellow]")
        return 130
    results = score(result.records, puzzles)
    labels = [s.label for s in specs]
    (result.path / "puzzles.json").write_text(json.dumps(results, indent=1, sort_keys=True), encoding="utf-8")
    console.print(table2(results, puzzles, labels))
    console.print(f"Per-puzzle verdicts: {result.path / 'puzzles.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
