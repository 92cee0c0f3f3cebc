"""`spielbus analyst --nats URL --out DIR`: every match scored as it ends, from the spectators' feed.

Follows the match stream read-only (`bus.follow.follow_stream`: stored read requests and a
doorbell subscription, no consumer, so the spectator login of `spielbus auth init` is enough), takes
each `ended` event's record (every hidden step revealed by then) and scores it with the references of
`spielbus analyse` (`analysis.match`) in a separate process, so the analysis never slows the bus
client or any match: the referee does not know it is there. Rows go to `DIR/analysis.jsonl`, a
match's rows in one write, in the order matches end. A restart reads the stream from its start again
and skips the matches already in the file (so it also scores what ended while it was down, as long as
the stream keeps it: seven days).

Limits: a match is scored when it ends, not move by move (the live page shows no evaluation bar
yet); one scoring process, so a burst of long chess matches queues; matches whose game has no
reference are logged and skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.js.api import RawStreamMsg
from pydantic import ValidationError

from analysis.match import Settings
from bus.connect import connect, nats_url
from bus.follow import follow_stream
from bus.protocol import MatchEvent, MatchRecord
from bus.subjects import Subjects
from spielbus.analyse import ANALYSIS_FILE, init_worker, read_analysis, score_record

log = logging.getLogger(__name__)


def _prepare(out_dir: Path) -> tuple[Path, set[str]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ANALYSIS_FILE
    return path, {r.match_id for r in read_analysis(path)}


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))  # one match, one write


async def serve(
    nc: NATS,
    subjects: Subjects,
    out_dir: Path,
    settings: Settings,
    stop: asyncio.Event,
    *,
    api_prefix: str | None = None,
) -> None:
    """Score every ended match of the stream into `out_dir/analysis.jsonl` until `stop` is set."""
    path, done = await asyncio.to_thread(_prepare, out_dir)
    queue: asyncio.Queue[MatchRecord] = asyncio.Queue()

    async def on_stored(msg: RawStreamMsg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data or b"")
        except ValidationError:
            return  # not ours to judge: the stream's other readers report it
        if event.type == "ended" and event.record is not None and event.match_id not in done:
            done.add(event.match_id)
            await queue.put(event.record)

    loop = asyncio.get_running_loop()
    pool = ProcessPoolExecutor(
        1, mp_context=get_context("spawn"), initializer=init_worker, initargs=(settings,)
    )
    follower = await follow_stream(
        nc, subjects.matches_stream, subjects.match_all("ended"), on_stored, api_prefix=api_prefix
    )
    try:
        with path.open("a", encoding="utf-8") as fh:
            while not stop.is_set():
                getter = asyncio.ensure_future(queue.get())
                stopper = asyncio.ensure_future(stop.wait())
                await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                stopper.cancel()
                if not getter.done():
                    getter.cancel()
                    break
                record = getter.result()
                match_id, lines, why = await loop.run_in_executor(
                    pool, score_record, record.model_dump_json()
                )
                if why is not None:
                    log.warning("not scored: %s: %s", match_id, why)
                if lines:
                    fh.write("".join(line + "\n" for line in lines))
                    fh.flush()
                    log.info("scored %s: %d moves", match_id, len(lines))
    finally:
        await follower.unsubscribe()
        pool.shutdown(wait=False, cancel_futures=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spielbus analyst", description=__doc__.split("\n")[0])
    p.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL or nats://127.0.0.1:4222)")
    p.add_argument("--out", default="analysis", help="folder of analysis.jsonl (default ./analysis)")
    p.add_argument("--prefix", default="spielbus")
    p.add_argument("--nodes", type=int, default=Settings.nodes, help="chess: Stockfish nodes per search")
    args = p.parse_args(argv)
    if args.nodes < 1:
        p.error("--nodes must be at least 1")

    async def run() -> None:
        nc = await connect(nats_url(args.nats), name="spielbus-analyst")
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        try:
            await serve(nc, Subjects(args.prefix), Path(args.out), Settings(nodes=args.nodes), stop)
        finally:
            with contextlib.suppress(Exception):
                await nc.drain()

    asyncio.run(run())
    return 0
