"""`spielbus analyse RUN_DIR`: every move of a finished run scored by a reference that is not a player.

Reads `RUN_DIR/matches.jsonl`, scores each match's moves (`analysis.match`: Stockfish for chess,
exact values for small perfect-information games and Ghost, GNU Go's estimate for Go, the CFR+
equilibrium for Kuhn, Leduc and the small-deck simplified Hold'em, an MCTS estimate elsewhere) and
appends one line per move to `RUN_DIR/analysis.jsonl` (`analysis.scale.MoveAnalysis`), a match's
lines in one write as soon as it is scored. Then it prints
and writes into `summary.json` (key `analysis`) each agent's accuracy, mean loss and blunders per 100
moves with 95% intervals (`analysis.summary`), and per game the reference's time per move
against the agents' own.

Resumable: a match already in analysis.jsonl is not scored again, so after Ctrl-C (exit 130) or a
crash the same command scores the rest; a torn last line (a crash mid-write) is dropped with the
rest of its match, which is scored again. `--jobs N` scores N matches at once in N processes, each
with its own engine and solver tables. Matches without a reference (a game none fits, chess without a
Stockfish binary, a record that does not replay) are listed with the reason, not scored, and tried
again by the next run. Exit 2 for a folder without matches.jsonl or a line that is no match record.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from multiprocessing import get_context
from pathlib import Path

from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from analysis.match import Judges, Settings, analyse_match
from analysis.scale import MoveAnalysis
from analysis.summary import AgentQuality, agent_quality
from analysis.verdict import NoReference
from bus.protocol import MatchRecord
from referee.records import JsonlError, read_jsonl

ANALYSIS_FILE = "analysis.jsonl"

_judges: Judges | None = None
Scored = tuple[str, list[str], str | None]  # match id, its rows as JSON lines, why not scored


def init_worker(settings: Settings) -> None:
    global _judges
    _judges = Judges(settings)


def score_record(record_json: str) -> Scored:
    """In a worker: (match id, its rows as JSON lines, why it was not scored or None)."""
    assert _judges is not None
    record = MatchRecord.model_validate_json(record_json)
    try:
        rows = analyse_match(record, _judges)
    except (NoReference, ValueError) as exc:
        return record.match_id, [], str(exc)
    finally:
        _judges.close()  # one engine per match: a pool's worker holding one would never exit
    return record.match_id, [r.model_dump_json() for r in rows], None


def score_last(record_json: str) -> Scored:
    """In a worker: the last step of a match in progress judged (the live analyst), its engine kept
    for the match's next move (the match's end closes it, in `score_record`)."""
    assert _judges is not None
    record = MatchRecord.model_validate_json(record_json)
    try:
        rows = analyse_match(record, _judges, start=len(record.moves) - 1)
    except (NoReference, ValueError) as exc:
        return record.match_id, [], str(exc)
    return record.match_id, [r.model_dump_json() for r in rows], None


def close_worker() -> None:
    """In a worker: stop the engines the live analyst kept for matches in progress."""
    if _judges is not None:
        _judges.close()


def read_analysis(path: Path, *, repair: bool = True) -> list[MoveAnalysis]:
    """The rows already written, whole matches only: a torn or bad line drops the rest of its match
    (its rows are contiguous), and with `repair` the file is rewritten without them."""
    if not path.is_file():
        return []
    rows: list[MoveAnalysis] = []
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    bad = False
    for line in lines:
        if not line.strip():
            continue
        try:
            rows.append(MoveAnalysis.model_validate_json(line))
        except ValidationError:
            bad = True
            break
    if bad:
        last = rows[-1].match_id if rows else None
        rows = [r for r in rows if r.match_id != last]
    if bad and repair:
        tmp = path.with_suffix(".jsonl.tmp")
        tmp.write_text("".join(r.model_dump_json() + "\n" for r in rows), encoding="utf-8")
        os.replace(tmp, path)
    return rows


def print_quality(console: Console, table: list[AgentQuality]) -> None:
    if not table:
        return
    t = Table(title="Move quality, 95% intervals over matches (spielbus analyse; docs/analysis.md)")
    for col in ("game", "agent", "reference", "moves", "accuracy %", "mean loss", "blunders/100"):
        t.add_column(col, justify="left" if col in ("game", "agent", "reference") else "right", no_wrap=True)
    for q in table:
        a, m, b = q.accuracy, q.mean_wc_loss, q.blunders_per_100
        t.add_row(
            q.game,
            q.agent,
            q.reference,
            str(q.moves),
            f"{a.value:.1f} ({a.lo:.1f}-{a.hi:.1f})",
            f"{m.value:.3f} ({m.lo:.3f}-{m.hi:.3f})",
            f"{b.value:.1f} ({b.lo:.1f}-{b.hi:.1f})",
        )
    if not console.is_terminal and console.width < 140:  # a pipe's 80 columns would cut every cell
        console = Console(file=console.file, width=140)
    console.print(t)


def cost(rows: list[MoveAnalysis], records: list[MatchRecord]) -> dict[str, dict[str, float]]:
    """Per game: the reference's mean time per scored move against the agents' own (the record's
    turn latency), both in milliseconds, over the moves scored."""
    latency = {(r.match_id, i): m.latency_ms for r in records for i, m in enumerate(r.moves)}
    out: dict[str, dict[str, float]] = {}
    for game in sorted({r.game for r in rows}):
        mine = [r for r in rows if r.game == game]
        played = [t for r in mine if (t := latency.get((r.match_id, r.index))) is not None]
        out[game] = {
            "moves": len(mine),
            "analysis_ms_per_move": sum(r.analysis_ms for r in mine) / len(mine),
            "play_ms_per_move": sum(played) / len(played) if played else 0.0,
        }
    return out


def _ms(value: float) -> str:
    """Milliseconds to three significant digits, whole ones from 100: an exact reference's hundredths
    of a millisecond must not print as 0."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"


def write_summary(
    run_dir: Path, table: list[AgentQuality], skipped: dict[str, str], costs: dict[str, dict[str, float]]
) -> None:
    """`summary.json` gains (or has replaced) its `analysis` key; the rest is kept."""
    path = run_dir / "summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        summary = {}
    if not isinstance(summary, dict):
        summary = {}
    summary["analysis"] = {"agents": [q.model_dump() for q in table], "not_scored": skipped, "cost": costs}
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(summary, indent=2), encoding="utf-8")
    os.replace(tmp, path)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus analyse", description=__doc__.split("\n")[0])
    p.add_argument("run_dir", metavar="RUN_DIR")
    p.add_argument(
        "--jobs", type=_positive, default=1, help="matches scored at once, each in its own process"
    )
    p.add_argument(
        "--nodes", type=_positive, default=Settings.nodes, help="chess: Stockfish nodes per search"
    )
    p.add_argument(
        "--stockfish", default=None, help="chess: the Stockfish binary (default: PATH, /usr/games)"
    )
    p.add_argument(
        "--iterations",
        type=_positive,
        default=Settings.iterations,
        help="poker: most CFR+ iterations (it stops at 0.002 chips per game of exploitability)",
    )
    p.add_argument(
        "--simulations",
        type=_positive,
        default=Settings.simulations,
        help="estimates: MCTS simulations per search",
    )
    p.add_argument(
        "--gnugo-level",
        type=_positive,
        default=Settings.gnugo_level,
        help="go: GNU Go's level for its own choice of move (1-10; lower is faster)",
    )
    p.add_argument(
        "--equilibrium",
        action="append",
        default=[],
        metavar="FILE",
        help="poker: a `spielbus selfplay solve` table to judge its game against (repeatable; "
        "needed for the simplified Hold'em)",
    )
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console(stderr=False)
    run_dir = Path(args.run_dir)
    try:
        records = list(read_jsonl(run_dir / "matches.jsonl", MatchRecord))
    except JsonlError as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2
    settings = Settings(
        args.nodes,
        args.stockfish,
        args.iterations,
        args.simulations,
        gnugo_level=args.gnugo_level,
        equilibria=tuple(args.equilibrium),
    )
    out = run_dir / ANALYSIS_FILE
    rows = read_analysis(out)
    done = {r.match_id for r in rows}
    todo = [r for r in records if r.match_id not in done and r.moves]
    skipped: dict[str, str] = {}
    try:
        with out.open("a", encoding="utf-8") as fh, _progress(console) as progress:
            task = progress.add_task("scoring matches", total=len(todo))
            for match_id, lines, why in _scored(todo, settings, args.jobs):
                if why is not None:
                    skipped[match_id] = why
                if lines:
                    fh.write("".join(line + "\n" for line in lines))  # one match, one write
                    fh.flush()
                    rows.extend(MoveAnalysis.model_validate_json(line) for line in lines)
                progress.advance(task)
    except KeyboardInterrupt:
        console.print(
            f"interrupted: the scored matches are kept; `spielbus analyse {run_dir}` scores the rest"
        )
        return 130
    for match_id, why in sorted(skipped.items()):
        console.print(f"not scored: {match_id}: {why}", highlight=False, soft_wrap=True)
    table = agent_quality(rows)
    print_quality(console, table)
    costs = cost(rows, records)
    for game, c in costs.items():
        console.print(
            f"{game}: the reference took {_ms(c['analysis_ms_per_move'])} ms per move, "
            f"the agents {_ms(c['play_ms_per_move'])} ms",
            highlight=False,
        )
    write_summary(run_dir, table, skipped, costs)
    console.print(f"{len(rows)} moves scored in {out}")
    return 0


def _progress(console: Console) -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )


def _scored(todo: list[MatchRecord], settings: Settings, jobs: int) -> Iterator[Scored]:
    """(match id, row lines, reason not scored) per match, as each is done."""
    if jobs == 1:
        init_worker(settings)
        try:
            for r in todo:
                yield score_record(r.model_dump_json())
        finally:
            assert _judges is not None
            _judges.close()
        return
    with ProcessPoolExecutor(
        jobs, mp_context=get_context("spawn"), initializer=init_worker, initargs=(settings,)
    ) as pool:
        pending: set[Future[Scored]] = set()
        queue = iter(todo)
        try:
            for r in queue:
                pending.add(pool.submit(score_record, r.model_dump_json()))
                if len(pending) >= 2 * jobs:
                    finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                    for f in finished:
                        yield f.result()
            for f in pending:
                yield f.result()
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
