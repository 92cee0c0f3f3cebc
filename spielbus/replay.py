"""`spielbus replay RUN_DIR`: play a finished tournament again from its run folder, no LLM server asked.

The run folder has what a replay needs: `tournament.toml`, `schedule.jsonl` (every match spec with
its chance secret), `matches.jsonl` (the records) and `llm/` (every LLM request and response,
agents/llm/recording.py). The replay first checks the recording (a missing or damaged response:
named, exit 1), then runs the same schedule (same tournament id, match ids, seeds and secrets) on
a fresh embedded bus with every agent's LLM answering from the recording (no LLM server is
started), into `RUN_DIR/replay/<tournament id>/`, and compares:

- each record, hashed after dropping the wall-clock fields `started_at`, `ended_at` (also of each
  voided play), every `latency_ms` (moves and faults) and every LLM call's `waited_s` (it includes
  the shared limiter's wait); the first match that differs is named with its first differing
  move (or field);
- the standings and ratings computed from both record sets, in schedule order;
- requests the recording does not hold (a changed prompt, a changed game): the first one is named.

Before playing, each agent's strategy version in the records (its provenance) is compared with this
code's: a kind whose version changed (`llm_policy` 2: the stable-prefix prompt layout) asks other
requests than the recording holds, so the replay stops there and names the agent (exit 1) rather
than diverging from the first LLM move. Kinds this code does not know are not checked.

Exit 0 when everything matches, 1 on a divergence or a bad recording, 2 on a bad run folder.

`--show MATCH` plays nothing: it prints one match's moves (by id, or by number in the schedule) with
their LLM calls: each call's class (answered, provider, config, filtered, truncated), status,
attempts, wait and tokens, the answer, and the thinking folded to its first 160 characters
(`--thinking`: whole, as far as the record keeps it: 4000 characters; the call store, `llm/`, has
all of it). A call's wait for its provider's shared limits (`waited_s`) is wall-clock time, left out
of the comparison like the latencies.

`--rescore` plays nothing: it recomputes standings and ratings from `matches.jsonl` under the
`[ratings]` settings of `--config FILE` (default: the run's own tournament file), with no bus and
no LLM call; `--by-budget` shows them per budget class (referee/budget.py).

Limits: an agent whose choices depend on wall-clock time (a search that stops at its deadline
with what it has) can ask other questions when answers come instantly; the replay then reports
the first request not in the recording. A match the original run played more than once (an
aborted attempt) is replayed as attempt 1, so its chance outcomes may differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from agents.llm.recording import MISSES_ENV, REPLAY_ENV, RecordingError, verify_recording
from agents.registry import KINDS, strategy_class
from bus import loop as bus_loop
from bus.protocol import LLMCall, MatchRecord, MatchSpec
from referee.budget import by_budget_class
from referee.config import ConfigError, TournamentConfig, load_config
from referee.records import JsonlError, M, read_jsonl
from referee.run_folder import summarize
from spielbus.report import print_report

# Fields that hold wall-clock measurements: a replay cannot reproduce them and they are not compared
# (`waited_s`: an LLM call's wait for its provider's shared limits, agents/llm/limits.py).
WALL_CLOCK_FIELDS = ("started_at", "ended_at", "latency_ms", "waited_s")
# `--show`: how much of a call's thinking is printed unless `--thinking` asks for all of it.
FOLDED_CHARS = 160


class RunDirError(Exception):
    """A run folder a replay cannot use; the message names the file."""


def normalized(record: MatchRecord) -> dict[str, Any]:
    """The record as compared: JSON without its wall-clock fields."""
    doc = record.model_dump(mode="json")
    for k in ("started_at", "ended_at"):
        doc.pop(k, None)
    for item in (*doc.get("moves", []), *doc.get("faults", [])):
        item.pop("latency_ms", None)
        # A call's wait includes the shared limiter's, measured on the clock (retry waits are replayed).
        for call in item.get("calls") or []:
            call.pop("waited_s", None)
    for play in doc.get("voided") or []:
        play.pop("ended_at", None)  # when a voided play ended: wall clock
    return doc


def _folded(text: str, whole: bool) -> str:
    if whole or len(text) <= FOLDED_CHARS:
        return text
    first = text[:FOLDED_CHARS].rsplit(" ", 1)[0]
    return f"{first} … (+{len(text) - len(first)} chars; --thinking shows it whole)"


def call_line(call: LLMCall) -> str:
    """One LLM call in one line: its class, status, finish reason, attempts, wait and tokens."""
    parts: list[str] = [call.outcome]
    parts += [f"HTTP {call.status}"] if call.status is not None else []
    parts += [f"finish {call.finish_reason}"] if call.finish_reason else []
    parts += [f"{call.attempts} attempts"] if call.attempts > 1 else []
    parts += [f"waited {call.waited_s:.1f}s"] if call.waited_s else []
    tokens = [
        f"{n} {what}"
        for n, what in (
            (call.prompt_tokens, "prompt"),
            (call.completion_tokens, "completion"),
            (call.reasoning_tokens, "reasoning"),
        )
        if n is not None
    ]
    if tokens:
        parts.append(", ".join(tokens) + " tokens" + (" (estimated)" if call.tokens_estimated else ""))
    parts += [f"${call.cost_usd:.6f}"] if call.cost_usd is not None else []
    return f"{call.id}: " + " · ".join(parts)


def show_match(record: MatchRecord, console: Console, thinking: bool = False) -> None:
    """Every move of a record with its LLM calls: each call's class, the answer, the thinking (folded
    to its first 160 characters unless `thinking`). The record is the match's end: nothing private
    is left to keep from a reader of the run folder."""
    console.print(
        f"{record.match_id}: {record.game.label()}, {' vs '.join(record.seats)}, {record.outcome}",
        highlight=False,
    )
    for void in record.voided or ():
        console.print(
            f"  voided at turn {void.turn} by {void.agent}'s provider: {void.cause}", highlight=False
        )
    faults = {(f.turn, f.seat): f for f in record.faults}
    steps: list[tuple[int, str, str, list[LLMCall]]] = []
    for m in record.moves:
        who = "chance" if m.player < 0 else f"{m.player} {m.agent or record.seats[m.player]}"
        steps.append((m.turn, who, m.text + (" (forced)" if m.forced else ""), list(m.calls or [])))
    for (turn, seat), f in faults.items():
        steps.append((turn, f"{seat} {f.agent}", f"fault {f.reason}: {f.detail}", list(f.calls or [])))
    for turn, who, text, calls in sorted(steps, key=lambda s: s[0]):
        console.print(f"  turn {turn}  {who}: {text}", highlight=False, soft_wrap=True)
        for call in calls:
            console.print(f"      {call_line(call)}", highlight=False, soft_wrap=True)
            if call.answer:
                console.print(f"        answer: {call.answer}", highlight=False, soft_wrap=True)
            if call.reasoning:
                size = call.reasoning_chars or len(call.reasoning)
                console.print(
                    f"        thinking ({size} chars): {_folded(call.reasoning, thinking)}",
                    highlight=False,
                    soft_wrap=True,
                )


def record_hash(record: MatchRecord) -> str:
    blob = json.dumps(normalized(record), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


def first_difference(a: MatchRecord, b: MatchRecord) -> str:
    """Where two records of one match first differ: a move (by turn) or a field."""
    na, nb = normalized(a), normalized(b)
    for i, (ma, mb) in enumerate(zip(na["moves"], nb["moves"], strict=False)):
        if ma != mb:
            keys = sorted(k for k in set(ma) | set(mb) if ma.get(k) != mb.get(k))
            texts = f"{ma.get('text')!r} vs {mb.get('text')!r}"
            return f"move {i} (turn {ma.get('turn')}): {', '.join(keys)} differ ({texts})"
    if len(na["moves"]) != len(nb["moves"]):
        return f"{len(na['moves'])} moves recorded, {len(nb['moves'])} replayed"
    keys = sorted(k for k in set(na) | set(nb) if na.get(k) != nb.get(k))
    return f"fields {', '.join(keys)} differ"


def _read_jsonl(path: Path, model: type[M]) -> list[M]:
    try:
        return list(read_jsonl(path, model))
    except JsonlError as exc:
        raise RunDirError(str(exc)) from None


def load_run(run_dir: Path) -> tuple[TournamentConfig, list[MatchSpec], list[MatchRecord]]:
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} is not a run folder")
    try:
        config = load_config(run_dir / "tournament.toml")
    except ConfigError as exc:
        raise RunDirError(str(exc)) from exc
    specs = _read_jsonl(run_dir / "schedule.jsonl", MatchSpec)
    records = _read_jsonl(run_dir / "matches.jsonl", MatchRecord)
    if not specs:
        raise RunDirError(f"{run_dir / 'schedule.jsonl'} holds no match")
    return config, specs, records


def in_order(records: list[MatchRecord], specs: list[MatchSpec]) -> list[MatchRecord]:
    by_id = {r.match_id: r for r in records}
    return [by_id[s.match_id] for s in specs if s.match_id in by_id]


def _summary(records: list[MatchRecord], config: TournamentConfig) -> list[Any]:
    table, rates = summarize(records, config)
    return [[s.model_dump() for s in table], [r.model_dump() for r in rates]]


def compare(
    config: TournamentConfig, specs: list[MatchSpec], original: list[MatchRecord], replayed: list[MatchRecord]
) -> list[str]:
    """Every divergence, first the first: missing records, changed records, changed ratings."""
    problems: list[str] = []
    mine = {r.match_id: r for r in replayed}
    for rec in in_order(original, specs):
        again = mine.get(rec.match_id)
        if again is None:
            problems.append(f"match {rec.match_id}: no record in the replay")
        elif record_hash(rec) != record_hash(again):
            problems.append(f"match {rec.match_id}: {first_difference(rec, again)}")
    a, b = in_order(original, specs), in_order(replayed, specs)
    if _summary(a, config) != _summary(b, config):
        problems.append("standings or ratings differ")
    return problems


def changed_versions(records: list[MatchRecord]) -> list[str]:
    """Agents recorded with another version of their strategy than this code's, one line each."""
    out: dict[str, str] = {}
    for rec in records:
        for p in rec.provenance:
            if p.agent in out or p.kind not in KINDS or p.version is None:
                continue
            now = strategy_class(p.kind).version
            if p.version != now:
                out[p.agent] = f"agent {p.agent!r} ({p.kind}): version {p.version} recorded, {now} here"
    return list(out.values())


def rescore(run_dir: Path, config_file: str | None, by_budget: bool, console: Console) -> int:
    config, specs, records = load_run(run_dir)
    if config_file:
        try:
            config = config.model_copy(update={"ratings": load_config(config_file).ratings})
        except ConfigError as exc:
            raise RunDirError(str(exc)) from exc
    records = in_order(records, specs)
    if by_budget:
        records = by_budget_class(records)
    table, rates = summarize(records, config)
    print_report(console, records, table, rates, str(run_dir), fallback_threshold=config.fallback_threshold)
    return 0


def show(run_dir: Path, which: str, thinking: bool, console: Console) -> int:
    """`--show MATCH`: one match's moves with their LLM calls (`show_match`)."""
    _, specs, records = load_run(run_dir)
    records = in_order(records, specs)
    chosen = [r for r in records if r.match_id == which]
    if not chosen and which.isdigit() and 1 <= int(which) <= len(records):
        chosen = [records[int(which) - 1]]
    if not chosen:
        raise RunDirError(f"no match {which!r} in {run_dir / 'matches.jsonl'} ({len(records)} matches)")
    show_match(chosen[0], console, thinking)
    return 0


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="spielbus replay",
        description="Play a run folder's tournament again with its recorded LLM answers (no LLM server) "
        "and check that every record and rating comes out the same; or re-score it (--rescore).",
    )
    p.add_argument("run_dir", help="a run folder written by `spielbus run` (runs/<tournament id>)")
    p.add_argument("--out", help="where the replay's run folder goes (default RUN_DIR/replay)")
    p.add_argument(
        "--rescore", action="store_true", help="play nothing: standings and ratings from matches.jsonl again"
    )
    p.add_argument("--config", help="--rescore: take the [ratings] settings from this tournament file")
    p.add_argument("--by-budget", action="store_true", help="--rescore: one row per agent and budget class")
    p.add_argument(
        "--show",
        metavar="MATCH",
        help="play nothing: print the moves of this match (its id, or its number in the schedule from 1) "
        "with their LLM calls: each call's class, the answer, the thinking folded",
    )
    p.add_argument("--thinking", action="store_true", help="--show: print each call's thinking whole")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    run_dir = Path(args.run_dir)
    try:
        if args.rescore:
            return rescore(run_dir, args.config, args.by_budget, console)
        if args.show:
            return show(run_dir, args.show, args.thinking, console)
        config, specs, original = load_run(run_dir)
    except RunDirError as exc:
        print(f"spielbus replay: {exc}", file=sys.stderr)
        return 2
    llm_dir = run_dir / "llm"
    try:
        n = verify_recording(llm_dir) if llm_dir.exists() else 0
    except RecordingError as exc:
        print(f"spielbus replay: {exc}", file=sys.stderr)
        return 1
    changed = changed_versions(original)
    if changed:
        print(
            f"spielbus replay: the run was recorded by other agent code: {'; '.join(changed)}. Its prompts "
            "or choices changed, so the recording does not hold what it would ask; replay it with the "
            "spielbus version that recorded it.",
            file=sys.stderr,
        )
        return 1
    out = Path(args.out) if args.out else run_dir / "replay"
    out.mkdir(parents=True, exist_ok=True)
    misses = out / f"misses-{os.getpid()}.jsonl"
    # The agents this run starts inherit these: their LLM answers come from the recording.
    os.environ[REPLAY_ENV] = str(llm_dir.resolve())
    os.environ[MISSES_ENV] = str(misses.resolve())
    from spielbus.run import RunOptions, run_tournament

    opts = RunOptions(
        run_dir=str(out), replay_specs=specs, config_path=str(run_dir / "tournament.toml"), quiet=args.quiet
    )
    t0 = time.monotonic()
    result = bus_loop.run(run_tournament(config, opts, console))
    wall = time.monotonic() - t0
    problems = compare(config, specs, original, result.records)
    first_miss = None
    if misses.exists():
        lines = misses.read_text(encoding="utf-8").splitlines()
        if lines:
            miss = json.loads(lines[0])
            first_miss = f"{miss['key']} (model {miss['model']}; last message {miss['last_message'][:120]!r})"
    same = sum(
        1
        for r in result.records
        for o in original
        if o.match_id == r.match_id and record_hash(o) == record_hash(r)
    )
    console.print(
        f"replay: {n} recorded LLM responses, {same} of {len(original)} records identical "
        f"(ignoring {', '.join(WALL_CLOCK_FIELDS)}), {wall:.1f}s; replay folder {result.path}",
        highlight=False,
    )
    if first_miss:
        console.print(
            f"[red]first request not in the recording:[/red] {first_miss}", highlight=False, soft_wrap=True
        )
    if problems:
        console.print(
            f"[red]first divergence:[/red] {problems[0]} ({len(problems)} in all)",
            highlight=False,
            soft_wrap=True,
        )
    return 1 if problems or first_miss else 0
