"""`spielbus run` and `spielbus submit`: a whole tournament, embedded or against a running bus.

Embedded (no `--nats`, no or an empty `NATS_URL`): start a nats-server, every non-external
agent as a child process, and referee workers in this process; play; print; stop
everything. With `--nats`: use that server; agents marked `external` and, with
`--no-referee` (what `spielbus submit` does), the referee workers must already be there.
With `--auth DIR` (from `spielbus auth init`): the embedded server enforces that folder's
users; this process logs in as the referee and each child agent as its own user.
SIGTERM is handled like Ctrl-C: referee workers hand their matches back, every child and the
embedded server (with its temporary store) are stopped, and the run folder keeps every
finished match. A run that fails before its first record leaves no run folder behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import shutil
import signal
import tempfile
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from nats.aio.client import Client as NATS
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from agents.llm.recording import RECORD_ENV, REPLAY_ENV, TAG_ENV
from bus.auth import config_path, login_for, user_env
from bus.connect import Login, connect
from bus.process import free_port
from bus.protocol import MatchRecord, MatchSpec
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects
from observability.web.serve import Observability, start_observability
from referee.config import ConfigError, TournamentConfig
from referee.presence import DEFAULT_ABSENT_LIMIT_S
from referee.resume import check_resumable
from referee.schedule import build_schedule
from referee.tournament import (
    DEFAULT_IDLE_S,
    Collector,
    CollectStopped,
    RunFolder,
    RunFolderError,
    submit_and_collect,
    summarize,
    tournament_id,
)
from referee.worker import DRAIN_GRACE_S, RefereeWorker
from spielbus.collect import read_records as read_stream_records
from spielbus.launch import AgentProcess, RefereeProcess, stop_all, wait_for_agents
from spielbus.llm_launch import LLMServerProcess, needs_embedded_llm
from spielbus.report import print_report, print_sprt
from spielbus.seats import plan_seats
from spielbus.sprt_run import SprtCollect, sprt_status, sprt_summary

log = logging.getLogger(__name__)

# How long `--workers N` waits for each referee process to be on the work queue.
REFEREE_READY_S = 120.0


@dataclass
class RunOptions:
    nats: str | None = None
    referee: bool = True
    workers: int = 1
    prefix: str = "spielbus"
    run_dir: str | None = None
    agent_wait_s: float = 120.0
    config_path: str | None = None
    quiet: bool = False
    metrics_port: int | None = None
    web_port: int | None = None
    host: str = "127.0.0.1"  # where the live page and metrics listen
    keep_serving: bool = False
    # An auth folder from `spielbus auth init`: the server enforces its users and permissions.
    auth_dir: str | None = None
    # The collector gives up after this long overall (None: no limit) or without progress.
    deadline_s: float | None = None
    idle_s: float | None = DEFAULT_IDLE_S
    # How long matches wait for an agent that does not answer before forfeiting it (docs/referee.md).
    absent_limit_s: float = DEFAULT_ABSENT_LIMIT_S
    drain_grace_s: float = DRAIN_GRACE_S
    # `--resume RUN_DIR`: continue the run in this run folder (referee/resume.py checks it is ours).
    resume: str | None = None
    # `spielbus replay` (spielbus/replay.py): play these specs (tournament id, match ids, chance secrets)
    # instead of a new schedule, every LLM answer served from the recording named by REPLAY_ENV.
    replay_specs: list[MatchSpec] | None = None


@dataclass
class RunResult:
    records: list[MatchRecord]
    path: Path
    failed: dict[str, str] = field(default_factory=dict)
    # Agents most of whose moves were fallbacks, unless the tournament file allows that.
    fallbacks: list[str] = field(default_factory=list)


async def _serve_until_signal(console: Console, obs: Observability) -> None:
    """`--keep-serving`: the page and the metrics stay up after the report until SIGINT/SIGTERM."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    console.print("Still serving (--keep-serving): " + "; ".join(obs.where()) + ". Ctrl-C stops.")
    try:
        await stop.wait()
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


class Interrupted(Exception):
    """SIGTERM (or SIGINT) stopped the run; everything was shut down and the folder kept."""

    def __init__(self, signame: str, finished: int, scheduled: int, path: Path) -> None:
        super().__init__(f"{signame}: stopped after {finished} of {scheduled} matches")
        self.signame = signame
        self.finished = finished
        self.scheduled = scheduled
        self.path = path


def _nats_url(opts: RunOptions) -> str | None:
    """`--nats`, else `NATS_URL`; an empty value means "none": start the embedded server."""
    return opts.nats or os.environ.get("NATS_URL") or None


async def run_tournament(
    config: TournamentConfig, opts: RunOptions, console: Console | None = None
) -> RunResult:
    """Run (or, without a referee, submit) a tournament. Every part started is stopped on every
    way out (an `AsyncExitStack`): normal end, error, Ctrl-C or SIGTERM (raised as `Interrupted`)."""
    console = console or Console()
    if opts.referee and opts.workers < 1:
        raise ConfigError(f"--workers must be at least 1 (got {opts.workers}); use --no-referee for none")
    if opts.resume:
        # The stored schedule, not a new one: the same match ids, seeds and chance secrets.
        resume_dir = Path(opts.resume)
        tid = check_resumable(resume_dir, config, opts.config_path or "the tournament file")
        folder = RunFolder(resume_dir.parent, tid)
        try:
            specs = folder.read_schedule() or []
        except ValidationError as exc:
            folder.close()
            raise ConfigError(
                f"--resume {resume_dir}: unreadable schedule.jsonl: {exc.errors()[:1]}"
            ) from exc
    elif opts.replay_specs:
        tid = opts.replay_specs[0].tournament
        specs = opts.replay_specs
    else:
        tid = tournament_id(config)
        specs = build_schedule(config, tid)
    agent_env: dict[str, dict[str, str]] = {}
    referee_login: Login = {}
    if opts.auth_dir:
        # Fail before anything starts if the referee or an agent we would launch has no user;
        # the errors name the folder and the user.
        ref = login_for(opts.auth_dir, "referee", prefix=opts.prefix)
        referee_login = {"user": ref.user, "password": ref.password}
        agent_env = {
            n: user_env(login_for(opts.auth_dir, "agent", n))
            for n, a in config.agents.items()
            if not a.external
        }
    if not opts.resume:
        folder = RunFolder(opts.run_dir or config.run_dir, tid)
    # Matches recorded in the folder (a resumed run starts with those of the earlier runs).
    collected = _Count(len(folder.recorded_ids()) if opts.resume else 0)
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()
    signalled: list[str] = []
    stop = asyncio.Event()

    def on_signal(name: str) -> None:
        # While collecting, the collector stops at its next step (an exception, not a cancellation:
        # Python 3.11's wait_for can swallow a cancellation that meets a completed request, and
        # the run would go on). Before that, or on a second signal, the task is cancelled.
        if signalled and task is not None:
            task.cancel()
        signalled.append(name)
        stop.set()
        if not collecting and task is not None:
            task.cancel()

    collecting: list[bool] = []
    # SIGTERM is handled like Ctrl-C: everything below stops cleanly and the run folder stays.
    for sig in (signal.SIGTERM, signal.SIGINT):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        return await _run(
            config, opts, console, tid, specs, folder, collected, agent_env, referee_login, stop, collecting
        )
    except (asyncio.CancelledError, CollectStopped):
        if not signalled:
            raise
        if not collected.n and not opts.resume:
            folder.close()
            shutil.rmtree(folder.path, ignore_errors=True)
        else:
            with contextlib.suppress(Exception):
                done = folder.read_records(specs)
                table, rates = summarize(done, config)
                folder.write_summary(
                    table,
                    rates,
                    {
                        "tournament": tid,
                        "matches": len(done),
                        "scheduled": len(specs),
                        "interrupted": signalled[0],
                        **sprt_summary(config, done),
                    },
                )
        raise Interrupted(signalled[0], collected.n, len(specs), folder.path) from None
    except BaseException:
        if not collected.n and not opts.resume:
            # A failed start leaves no empty run folder behind.
            folder.close()
            shutil.rmtree(folder.path, ignore_errors=True)
        raise
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(sig)
        folder.close()


async def _run(
    config: TournamentConfig,
    opts: RunOptions,
    console: Console,
    tid: str,
    specs: list[MatchSpec],
    folder: RunFolder,
    collected: _Count,
    agent_env: dict[str, dict[str, str]],
    referee_login: Login,
    stop: asyncio.Event,
    collecting: list[bool],
) -> RunResult:
    if opts.config_path and not opts.resume:
        try:
            shutil.copy(opts.config_path, folder.path / "tournament.toml")
        except OSError as exc:
            raise RunFolderError(
                f"cannot write to the run folder {folder.path}: {exc.strerror or exc}"
            ) from exc
    if not opts.resume:
        folder.write_schedule(specs)
        folder.write_run_info(config)
    subjects = Subjects(opts.prefix)
    url = _nats_url(opts)
    processes: list[AgentProcess] = []
    async with contextlib.AsyncExitStack() as stack:
        if url is None:
            embedded = EmbeddedNats(
                log_file=folder.path / "nats-server.log",
                config=config_path(opts.auth_dir) if opts.auth_dir else None,
            ).start()
            stack.callback(embedded.stop)
            url = embedded.url
            console.print(f"Embedded nats-server at {url}")
        nc = await connect(url, name=f"spielbus-run-{tid}", **referee_login)
        todo = specs
        if opts.resume:
            todo = await _resume_todo(nc, subjects, folder, specs, collected, console)

        async def close_nc() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.drain(), 10)
            with contextlib.suppress(Exception):
                await nc.close()

        stack.push_async_callback(close_nc)
        stack.callback(stop_all, processes)
        obs = await start_observability(
            nc,
            subjects,
            metrics_port=opts.metrics_port,
            web_port=opts.web_port,
            host=opts.host,
            fallback=True,
            ratings_config=config.ratings,
            child_metrics=lambda: [
                f"http://127.0.0.1:{p.metrics_port}/metrics" for p in processes if p.metrics_port
            ],
        )
        stack.push_async_callback(obs.stop)
        for line in obs.where():
            console.print(line, highlight=False)
        agent_options = {n: config.agent_options(n) for n, a in config.agents.items() if not a.external}
        llm_users = [n for n, o in agent_options.items() if needs_embedded_llm(config.agents[n].kind, o)]
        if llm_users and not os.environ.get(REPLAY_ENV):
            llm_server = LLMServerProcess(folder.path / "logs" / "llm-server.log")
            stack.callback(llm_server.stop)
            with console.status(f"Starting the embedded LLM server for {', '.join(llm_users)}..."):
                await llm_server.wait_ready()
            console.print(f"Embedded LLM server (llama.cpp, SmolLM2-135M) at {llm_server.base_url}")
            for n in llm_users:
                agent_options[n]["llm"] = {**agent_options[n].get("llm", {}), "base_url": llm_server.base_url}
        # Human seats (docs/human.md): the token only on this console, the bare address on the page.
        seats = plan_seats(config, agent_options)
        for name, acfg in config.agents.items():
            if acfg.external:
                continue
            for i in range(acfg.replicas):
                log_path = folder.path / "logs" / f"{name}-{i}.log"
                # Every LLM request and response is kept in the run folder (agents/llm/recording.py).
                creds = {
                    **agent_env.get(name, {}),
                    RECORD_ENV: str(folder.path.resolve() / "llm"),
                    TAG_ENV: f"{name}-{i}",
                }
                if name in seats:
                    creds = {**creds, **seats[name].env()}
                port = free_port() if opts.metrics_port is not None else None
                processes.append(
                    AgentProcess(
                        name,
                        acfg,
                        url,
                        opts.prefix,
                        log_path,
                        i,
                        extra_env=creds,
                        metrics_port=port,
                        options=agent_options[name],
                    )
                )
        with console.status(f"Waiting for {len(config.agents)} agents to join the bus..."):
            missing = await wait_for_agents(nc, list(config.agents), processes, opts.agent_wait_s)
        if missing:
            console.print(
                f"[yellow]warning:[/yellow] agents not on the bus after {opts.agent_wait_s:.0f}s: "
                f"{', '.join(missing)}; their matches wait up to {opts.absent_limit_s:.0f}s for them "
                "(--absent-limit), then their turns are recorded as `no_responder`"
            )
        for seat in seats.values():  # once their pages are up
            line = f"Seat of {seat.agent} (human): {seat.private_url}"
            console.print(line, highlight=False, soft_wrap=True)  # one line: the address is copied whole
            if obs.web is not None:
                obs.web.seats.append({"agent": seat.agent, "url": seat.url})
        if opts.referee:
            await stack.enter_async_context(_workers(nc, subjects, config, opts, obs, folder.path / "logs"))

        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=opts.quiet,
        )
        with progress:
            bar = progress.add_task(f"{tid}", total=len(specs), completed=len(specs) - len(todo))

            def on_record(rec: MatchRecord) -> None:
                # Written to the folder and counted, never kept: the folder is the record.
                folder.append(rec)
                collected.n += 1
                progress.advance(bar)

            def stalled() -> None:
                progress.console.print(
                    "[yellow]No referee has started a match yet: is `spielbus referee` running "
                    f"against {url}?[/yellow]"
                )

            collector = Collector(todo, on_record, keep=False)
            collecting.append(True)
            # Everything built so far (modules, pydantic schemas, the schedule's specs, the
            # agents' and workers' state) lives as long as the run: moved out of the collector's
            # reach, a full collection walks only what play creates. Measured with
            # benchmarks/soak.py (10,000 matches): see docs/referee.md, "Soak".
            gc.freeze()
            stack.callback(gc.unfreeze)
            # format sprt: pair by pair until the test decides, the LLR on the progress bar.
            collect = (
                SprtCollect(
                    config,
                    lambda st: progress.update(bar, description=f"{tid} {st.short()}"),
                    schedule=specs,
                    prior=folder.read_records(specs) if opts.resume else None,
                )
                if config.format == "sprt"
                else submit_and_collect
            )
            try:
                await collect(
                    nc,
                    todo,
                    subjects,
                    on_record,
                    stall_warning=stalled,
                    deadline_s=opts.deadline_s,
                    idle_s=opts.idle_s,
                    collector=collector,
                    stop=stop,
                )
            except RunFolderError as exc:
                raise RunFolderError(
                    f"{exc}. Stopped; the bus keeps every record: `spielbus collect {tid}` "
                    "rebuilds the run folder once there is room"
                ) from exc
        # Read back once, after play (in schedule order, so a resumed run's ratings equal an
        # uninterrupted run's): nothing per record was held while matches were being played.
        records = folder.read_records(specs)
        table, rates = summarize(records, config)
        failed = dict(collector.failed)
        fallback_agents = [s.agent for s in table if s.mostly_fallbacks]
        folder.write_summary(
            table,
            rates,
            {
                "tournament": tid,
                "matches": len(records),
                "scheduled": len(specs),
                "failed": failed,
                "rejected_records": collector.rejected,
                "mostly_fallbacks": fallback_agents,
                "nats": url,
                **({"resumed": len(specs) - len(todo)} if opts.resume else {}),
                **sprt_summary(config, records),
            },
        )
        print_report(console, records, table, rates, str(folder.path))
        if (sprt := sprt_status(config, records)) is not None:
            print_sprt(console, sprt)
        if failed:
            reasons = ", ".join(f"{n} {r}" for r, n in Counter(failed.values()).most_common())
            console.print(
                f"[red]{len(failed)} of {len(specs)} matches have no record:[/red] {reasons} "
                f"(e.g. {', '.join(sorted(failed)[:3])}); listed in summary.json",
                highlight=False,
            )
        if fallback_agents and not config.allow_fallbacks:
            console.print(
                f"[red]most moves of {', '.join(fallback_agents)} were fallbacks:[/red] the run fails "
                "(set `allow_fallbacks = true` in the tournament file to accept that)",
                highlight=False,
            )
        if opts.keep_serving and obs.where():
            await _serve_until_signal(console, obs)
        return RunResult(
            records=records,
            path=folder.path,
            failed=failed,
            fallbacks=[] if config.allow_fallbacks else fallback_agents,
        )


@dataclass
class _Count:
    """Matches recorded in the run folder so far."""

    n: int = 0


async def _resume_todo(
    nc: NATS,
    subjects: Subjects,
    folder: RunFolder,
    specs: list[MatchSpec],
    collected: _Count,
    console: Console,
) -> list[MatchSpec]:
    """The specs a resumed run still has to play: those without a record in the folder, less those
    whose record the match stream still holds (written to the folder first: a run killed between
    the stream and the folder loses nothing). An embedded server starts empty, so only the folder counts."""
    done = folder.recorded_ids()
    todo = [s for s in specs if s.match_id not in done]
    if todo:
        await ensure_streams(nc.jetstream(), subjects)  # a fresh embedded server has none yet
        found, _ = await read_stream_records(nc, subjects, folder.path.name, todo)
        for s in todo:
            if s.match_id in found:
                folder.append(found[s.match_id])
                collected.n += 1
        todo = [s for s in todo if s.match_id not in found]
    console.print(
        f"Resuming {folder.path.name}: {len(specs) - len(todo)} of {len(specs)} matches recorded; "
        f"playing the other {len(todo)}",
        highlight=False,
    )
    return todo


@contextlib.asynccontextmanager
async def _workers(
    nc: NATS,
    subjects: Subjects,
    config: TournamentConfig,
    opts: RunOptions,
    obs: Observability,
    log_dir: Path | None = None,
) -> AsyncIterator[list[RefereeWorker]]:
    """`--workers 1`: one referee worker in this process. `--workers N` (N > 1): N `spielbus referee`
    processes (`spielbus.launch.RefereeProcess`), each with the tournament's concurrency; their
    logs go to `log_dir` (the run folder's logs), their metrics are their own (not re-exported)."""
    if opts.workers > 1:
        url = nc.connected_url.geturl() if nc.connected_url is not None else (opts.nats or "")
        logs = log_dir or Path(tempfile.mkdtemp(prefix="spielbus-referees-"))
        children = [
            RefereeProcess(
                url,
                opts.prefix,
                logs / f"referee-{i}.log",
                concurrency=config.concurrency,
                absent_limit_s=opts.absent_limit_s,
                drain_grace_s=opts.drain_grace_s,
                auth_dir=opts.auth_dir,
            )
            for i in range(opts.workers)
        ]
        try:
            # All N on the queue before the first spec goes out, so `--workers N` means N referees.
            await asyncio.gather(*(asyncio.to_thread(c.wait_ready, REFEREE_READY_S) for c in children))
            yield []
        finally:
            # Shielded: an interrupted run still lets each referee hand its matches back.
            await asyncio.shield(
                asyncio.gather(*(asyncio.to_thread(c.stop, opts.drain_grace_s + 5) for c in children))
            )
        return
    workers: list[RefereeWorker] = []
    tasks: list[asyncio.Task[None]] = []
    for _ in range(opts.workers):
        w = RefereeWorker(
            nc,
            subjects=subjects,
            concurrency=config.concurrency,
            absent_limit_s=opts.absent_limit_s,
            drain_grace_s=opts.drain_grace_s,
        )
        if obs.metrics is not None:
            w.publisher.listeners.append(obs.metrics.on_event)
        workers.append(w)
        tasks.append(asyncio.create_task(w.run()))
    try:
        yield workers
    finally:
        for w in workers:
            w.stop()
        # Shielded: an interrupted run still hands its matches in flight back to the work queue.
        await asyncio.shield(asyncio.gather(*tasks, return_exceptions=True))
