"""`spielbus collect TOURNAMENT_ID`: rebuild a run folder from the `SPIELBUS_MATCHES` stream.

For a run whose collector was killed, lost its disk, or ran on another machine: reads every
`ended` event of the tournament that the stream still holds (it keeps seven days), keeps the
first valid record per match id in stream order (the same rule as the live collector, so the
folder agrees with every other reader), and rewrites `matches.jsonl`, `standings.json`,
`ratings.json` and `summary.json`. When the folder holds `schedule.jsonl` (every run writes
it) the records are checked against their specs, chance secret included, and the matches
still missing are named; without it every record of the tournament id is taken as it is.
The ratings use the folder's `tournament.toml` when there is one (else `--file`, else
defaults). Exit 0 when every scheduled match has a record, 1 when some are missing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import time
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy
from pydantic import ValidationError
from rich.console import Console

from bus.connect import connect, nats_url
from bus.protocol import MatchEvent, MatchRecord, MatchSpec
from bus.subjects import Subjects, check_token
from referee.acceptance import record_problem
from referee.config import ConfigError, RatingsConfig, TournamentConfig, load_config
from referee.ratings import Rating, Standing, ratings, standings
from referee.run_folder import RunFolder, RunFolderError, summarize
from spielbus.report import print_report

QUIET_S = 2.0


async def read_records(
    nc: NATS, subjects: Subjects, tid: str, specs: list[MatchSpec] | None
) -> tuple[dict[str, MatchRecord], int]:
    """The first valid record per match id of tournament `tid`, and how many were rejected."""
    js = nc.jetstream()
    info = await js.stream_info(subjects.matches_stream)
    end = int(info.state.last_seq)
    by_id = {s.match_id: s for s in specs} if specs is not None else None
    records: dict[str, MatchRecord] = {}
    rejected = 0
    done = asyncio.Event()
    seen = 0
    last = time.monotonic()

    async def on_msg(msg: Msg) -> None:
        nonlocal rejected, seen, last
        last = time.monotonic()
        seq = int(msg.metadata.sequence.stream)
        seen = max(seen, seq)
        if seq >= end or msg.metadata.num_pending == 0:
            done.set()
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        if event.tournament != tid or event.record is None or event.match_id in records:
            return
        if by_id is not None:
            spec = by_id.get(event.match_id)
            if spec is None or record_problem(spec, event) is not None:
                rejected += 1
                return
        elif event.record.match_id != event.match_id or event.record.tournament != tid:
            rejected += 1
            return
        records[event.match_id] = event.record

    if end == 0:
        return records, 0
    sub = await js.subscribe(
        subjects.match_all("ended"),
        cb=on_msg,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.ALL,
        stream=subjects.matches_stream,
    )
    try:
        # The last `ended` event may lie before the stream's last message (a later match's
        # `started` or `forfeit`): stop when the consumer has nothing pending, or has been quiet for a while.
        while not done.is_set() and time.monotonic() - last < QUIET_S:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(done.wait(), 0.5)
    finally:
        with contextlib.suppress(Exception):
            await sub.unsubscribe()
    return records, rejected


def _summarize(
    records: list[MatchRecord], config: TournamentConfig | None
) -> tuple[list[Standing], list[Rating]]:
    if config is not None:
        return summarize(records, config)
    return standings(records), ratings(records, RatingsConfig())


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus collect", description=__doc__.split("\n")[0])
    p.add_argument("tournament", help="the tournament id (the run folder's name)")
    p.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL or nats://127.0.0.1:4222)")
    p.add_argument("--run-dir", default="runs", help="parent folder of the run folder (default runs)")
    p.add_argument("--file", default=None, help="tournament file for the ratings (default: the folder's)")
    p.add_argument("--prefix", default="spielbus")
    return p


async def collect(
    nc: NATS, subjects: Subjects, tid: str, run_dir: str | Path, config: TournamentConfig | None
) -> tuple[RunFolder, list[MatchRecord], list[str], int]:
    folder = RunFolder(run_dir, tid)
    try:
        specs = folder.read_schedule()
        found, rejected = await read_records(nc, subjects, tid, specs)
        order = [s.match_id for s in specs] if specs is not None else sorted(found)
        records = [found[m] for m in order if m in found]
        missing = [m for m in order if m not in found]
        folder.rewrite(records)
        table, rates = _summarize(records, config)
        folder.write_summary(
            table,
            rates,
            {
                "tournament": tid,
                "matches": len(records),
                "scheduled": len(specs) if specs is not None else None,
                "missing": missing,
                "rejected_records": rejected,
                "collected_from_stream": True,
            },
        )
        return folder, records, missing, rejected
    finally:
        folder.close()


def main(argv: list[str]) -> int:
    args = _parser().parse_args(argv)
    console = Console()
    try:
        check_token(args.tournament, "tournament id")
        path = Path(args.run_dir) / args.tournament
        cfg_file = args.file or (
            str(path / "tournament.toml") if (path / "tournament.toml").exists() else None
        )
        config = load_config(cfg_file) if cfg_file else None
        Subjects(args.prefix).turn("x")
    except (ConfigError, ValueError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 2

    async def run() -> tuple[RunFolder, list[MatchRecord], list[str], int]:
        nc = await connect(nats_url(args.nats), name=f"spielbus-collect-{args.tournament}")
        try:
            return await collect(nc, Subjects(args.prefix), args.tournament, args.run_dir, config)
        finally:
            with contextlib.suppress(Exception):
                await nc.drain()

    try:
        folder, records, missing, rejected = asyncio.run(run())
    except (ConnectionError, RunFolderError) as exc:
        console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        return 1
    except ValidationError as exc:
        console.print(
            f"[red]error:[/red] unreadable schedule.jsonl: {exc.errors()[:1]}",
            highlight=False,
            soft_wrap=True,
        )
        return 1
    if records:
        table, rates = _summarize(records, config)
        threshold = config.fallback_threshold if config is not None else 0.05
        print_report(console, records, table, rates, str(folder.path), fallback_threshold=threshold)
    console.print(
        f"collected {len(records)} records of {args.tournament} from the stream"
        + (f"; {rejected} invalid ones ignored" if rejected else "")
        + (f"; [red]{len(missing)} matches have no record[/red]" if missing else ""),
        highlight=False,
    )
    return 1 if missing or not records else 0
