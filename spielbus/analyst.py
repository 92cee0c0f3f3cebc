"""`spielbus analyst --nats URL --out DIR`: every match scored as it ends, from the spectators' feed.

Follows the match stream read-only (`bus.follow.follow_stream`: stored read requests and a
doorbell subscription, no consumer, so the spectator login of `spielbus auth init` is enough), takes
each `ended` event's record (every hidden step revealed by then) and scores it with the references of
`spielbus analyse` (`analysis.match`) in a separate process, so the analysis never slows the bus
client or any match: the referee does not know it is there. Rows go to `DIR/analysis.jsonl`, a
match's rows in one write, in the order matches end. A restart reads the stream from its start again
and skips the matches already in the file (so it also scores what ended while it was down, as long as
the stream keeps it: seven days).

With `--metrics-port N` it serves Prometheus gauges of each agent's figures (per game and
reference, over every match in the file, 95% bootstrap intervals as `spielbus analyse` computes
them), refreshed after each scored match: `spielbus_move_accuracy_percent`,
`spielbus_move_mean_loss` (winning chances), `spielbus_move_blunders_per_100`, each with `_low` and
`_high`, and `spielbus_move_scored` (moves counted). Labels: `game`, `agent`, `reference`.

Live: each move of a two-player perfect-information match is also judged as its `moved` event
arrives (a plain subscription, read only) and the verdict published as a `move_verdict` on
`spielbus.analysis.<match_id>` (class, winning-chances loss, seat 0's winning chances after the
move, the reference's best move): the live page draws its evaluation bar and each move's class from
them. `--no-live` turns this off.

Limits: one scoring process, so a burst of long chess matches queues (and live verdicts with them);
a match whose game has no reference, or whose steps are hidden (imperfect information), gets no live
verdicts and is scored when it ends; moves played before the analyst started are not judged live.
Under `spielbus auth init` accounts the spectator login may not publish: live verdicts need a login
that may publish on `spielbus.analysis.>`, which the referee's has: `--auth DIR` logs in as the
referee of that folder (as the compose stack's `analyst` service does).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
from collections import OrderedDict
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from multiprocessing import get_context
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import RawStreamMsg
from prometheus_client import CollectorRegistry, Gauge
from pydantic import ValidationError

from analysis.match import Settings
from analysis.scale import MoveAnalysis
from analysis.summary import AgentQuality, agent_quality
from bus.auth import AuthError, login_for
from bus.connect import Login, connect, nats_url, redact
from bus.follow import follow_stream
from bus.protocol import MatchEvent, MatchRecord, MoveRecord, MoveVerdict
from bus.subjects import Subjects
from observability.metrics import serve_metrics
from observability.web import port_arg
from spielbus.analyse import (
    ANALYSIS_FILE,
    close_worker,
    init_worker,
    read_analysis,
    score_last,
    score_record,
)

log = logging.getLogger(__name__)
_FIGURES = (
    ("accuracy", "spielbus_move_accuracy_percent", "Move accuracy (Lichess's formula), percent"),
    ("mean_wc_loss", "spielbus_move_mean_loss", "Mean loss per move, winning chances"),
    ("blunders_per_100", "spielbus_move_blunders_per_100", "Blunders per 100 moves"),
)


class QualityMetrics:
    """Per agent, game and reference: the analysis figures as Prometheus gauges."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        labels = ["game", "agent", "reference"]
        self.gauges: dict[str, tuple[Gauge, Gauge, Gauge]] = {
            key: (
                Gauge(name, f"{text} (spielbus analyst).", labels, registry=self.registry),
                Gauge(f"{name}_low", "Lower end of its 95% interval.", labels, registry=self.registry),
                Gauge(f"{name}_high", "Upper end of its 95% interval.", labels, registry=self.registry),
            )
            for key, name, text in _FIGURES
        }
        self.moves = Gauge(
            "spielbus_move_scored", "Moves scored and counted.", labels, registry=self.registry
        )

    def set(self, table: list[AgentQuality]) -> None:
        for q in table:
            labels = (q.game, q.agent, q.reference)
            for key, (value, low, high) in self.gauges.items():
                figure = getattr(q, key)
                value.labels(*labels).set(figure.value)
                low.labels(*labels).set(figure.lo)
                high.labels(*labels).set(figure.hi)
            self.moves.labels(*labels).set(q.moves)


def _prepare(out_dir: Path) -> tuple[Path, list[MoveAnalysis]]:
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / ANALYSIS_FILE
    return path, read_analysis(path)


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.write("".join(line + "\n" for line in lines))  # one match, one write


MAX_LIVE = 1000  # matches followed move by move at once (the oldest is dropped past it)


@dataclass
class _Live:
    """A match in progress as the `moved` events show it (perfect information only)."""

    event: MatchEvent
    moves: list[MoveRecord] = field(default_factory=list)
    off: bool = False  # a hidden step, or no reference: not judged live


def verdict(row: MoveAnalysis) -> MoveVerdict:
    mover = row.wc_played if row.wc_played is not None else 0.0
    return MoveVerdict(
        match_id=row.match_id,
        turn=row.turn,
        seat=row.seat,
        agent=row.agent,
        text=row.text,
        cls=row.cls,
        wc_loss=row.wc_loss,
        accuracy=row.accuracy,
        eval=mover if row.seat == 0 else -mover,  # two players, zero-sum: seat 0's chances
        best_text=row.best_text,
        reference=row.reference.name,
        exact=row.reference.exact,
    )


async def serve(
    nc: NATS,
    subjects: Subjects,
    out_dir: Path,
    settings: Settings,
    stop: asyncio.Event,
    *,
    api_prefix: str | None = None,
    metrics: QualityMetrics | None = None,
    live: bool = True,
) -> None:
    """Score every ended match of the stream into `out_dir/analysis.jsonl` until `stop` is set,
    keeping `metrics` (if given) at the figures of every row in the file; with `live`, also judge
    each move of a perfect-information match as its `moved` event arrives and publish the verdict
    (`move_verdict` on `subjects.analysis(match_id)`)."""
    path, rows = await asyncio.to_thread(_prepare, out_dir)
    done = {r.match_id for r in rows}
    if metrics is not None:
        metrics.set(await asyncio.to_thread(agent_quality, rows))
    # One queue, in arrival order: ("end", record) or ("live", the match's moves so far).
    queue: asyncio.Queue[tuple[str, MatchRecord]] = asyncio.Queue()
    following: OrderedDict[str, _Live] = OrderedDict()

    async def on_stored(msg: RawStreamMsg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data or b"")
        except ValidationError:
            return  # not ours to judge: the stream's other readers report it
        if event.type == "ended" and event.record is not None and event.match_id not in done:
            done.add(event.match_id)
            following.pop(event.match_id, None)
            await queue.put(("end", event.record))

    async def on_moved(msg: Msg) -> None:
        try:
            event = MatchEvent.model_validate_json(msg.data)
        except ValidationError:
            return
        if event.type != "moved" or event.move is None or event.match_id in done:
            return
        m = following.get(event.match_id)
        if m is None:
            if len(event.seats) != 2:
                return
            m = following[event.match_id] = _Live(event)
            while len(following) > MAX_LIVE:
                following.popitem(last=False)
        if m.off or event.hidden or (m.moves and event.move.turn <= m.moves[-1].turn):
            m.off = m.off or event.hidden
            return
        m.moves.append(event.move)
        if event.move.player >= 0:
            e = m.event
            record = MatchRecord(
                match_id=e.match_id, tournament=e.tournament, game=e.game, seats=list(e.seats), seed=0,
                moves=list(m.moves),
            )  # fmt: skip
            await queue.put(("live", record))

    loop = asyncio.get_running_loop()
    pool = ProcessPoolExecutor(
        1, mp_context=get_context("spawn"), initializer=init_worker, initargs=(settings,)
    )
    follower = await follow_stream(
        nc, subjects.matches_stream, subjects.match_all("ended"), on_stored, api_prefix=api_prefix
    )
    moved = await nc.subscribe(subjects.match_all("moved"), cb=on_moved) if live else None
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
                kind, record = getter.result()
                if kind == "live":
                    await _judge_live(nc, subjects, pool, record, following)
                    continue
                match_id, lines, why = await loop.run_in_executor(
                    pool, score_record, record.model_dump_json()
                )
                if why is not None:
                    log.warning("not scored: %s: %s", match_id, why)
                if lines:
                    fh.write("".join(line + "\n" for line in lines))
                    fh.flush()
                    log.info("scored %s: %d moves", match_id, len(lines))
                    if metrics is not None:
                        rows.extend(MoveAnalysis.model_validate_json(line) for line in lines)
                        metrics.set(await asyncio.to_thread(agent_quality, rows))
    finally:
        if moved is not None:
            with contextlib.suppress(Exception):
                await moved.unsubscribe()
        await follower.unsubscribe()
        # Engines kept for live matches would keep the worker from exiting: stop them first.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(loop.run_in_executor(pool, close_worker), 30)
        pool.shutdown(wait=False, cancel_futures=True)


async def _judge_live(
    nc: NATS, subjects: Subjects, pool: ProcessPoolExecutor, record: MatchRecord, following: dict[str, _Live]
) -> None:
    """Judge the last step of a match in progress and publish the verdict; a match whose game has
    no reference (or whose steps do not replay) is not followed further."""
    m = following.get(record.match_id)
    if m is None or m.off:
        return  # it ended (scored whole now) or was given up
    loop = asyncio.get_running_loop()
    match_id, lines, why = await loop.run_in_executor(pool, score_last, record.model_dump_json())
    if why is not None:
        m.off = True
        log.info("not judged live: %s: %s", match_id, why)
        return
    for line in lines:
        v = verdict(MoveAnalysis.model_validate_json(line))
        await nc.publish(subjects.analysis(match_id), v.model_dump_json().encode())


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="spielbus analyst", description=__doc__.split("\n")[0])
    p.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL or nats://127.0.0.1:4222)")
    p.add_argument("--out", default="analysis", help="folder of analysis.jsonl (default ./analysis)")
    p.add_argument("--prefix", default="spielbus")
    p.add_argument("--nodes", type=int, default=Settings.nodes, help="chess: Stockfish nodes per search")
    p.add_argument("--metrics-port", type=port_arg, default=None, help="Prometheus metrics (off)")
    p.add_argument("--host", default="127.0.0.1", help="address of the metrics endpoint")
    p.add_argument("--no-live", action="store_true", help="score matches when they end only")
    p.add_argument(
        "--auth",
        default=None,
        metavar="DIR",
        help="log in as the referee of this `spielbus auth init` folder (it may publish live verdicts); "
        "default: the environment's login",
    )
    args = p.parse_args(argv)
    if args.nodes < 1:
        p.error("--nodes must be at least 1")
    login: Login = {}
    if args.auth:
        try:
            user = login_for(args.auth, "referee", prefix=args.prefix)
        except AuthError as exc:
            p.error(f"--auth: {exc}")
        login = {"user": user.user, "password": user.password}

    async def run() -> None:
        nc = await connect(nats_url(args.nats), name="spielbus-analyst", **login)
        stop = asyncio.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(sig, stop.set)
        metrics = server = None
        if args.metrics_port is not None:
            metrics = QualityMetrics()
            server = serve_metrics(metrics.registry, args.metrics_port, host=args.host)
            log.info("metrics on %s", server.url)
        # The ready line (compose logs; tests/test_deploy.py waits for it).
        print(
            f"analyst on {redact(nats_url(args.nats))}: scoring into {Path(args.out) / ANALYSIS_FILE}",
            flush=True,
        )
        try:
            await serve(
                nc,
                Subjects(args.prefix),
                Path(args.out),
                Settings(nodes=args.nodes),
                stop,
                metrics=metrics,
                live=not args.no_live,
            )
        finally:
            if server is not None:
                server.stop()
            with contextlib.suppress(Exception):
                await nc.drain()

    asyncio.run(run())
    return 0
