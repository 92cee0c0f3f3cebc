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
import logging
import os
import shutil
import signal
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

from nats.aio.client import Client as NATS
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bus.auth import config_path, login_for, user_env
from bus.connect import Login, connect
from bus.process import free_port
from bus.protocol import MatchRecord, MatchSpec
from bus.server import EmbeddedNats
from bus.subjects import Subjects
from observability.web.serve import Observability, start_observability
from referee.config import ConfigError, TournamentConfig
from referee.presence import DEFAULT_ABSENT_LIMIT_S
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
from spielbus.launch import AgentProcess, stop_all, wait_for_agents
from spielbus.llm_launch import LLMServerProcess, needs_embedded_llm
from spielbus.report import print_report

log = logging.getLogger(__name__)


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
    folder = RunFolder(opts.run_dir or config.run_dir, tid)
    collected: list[MatchRecord] = []
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
        if not collected:
            folder.close()
            shutil.rmtree(folder.path, ignore_errors=True)
        else:
            with contextlib.suppress(Exception):
                table, rates = summarize(collected, config)
                folder.write_summary(
                    table,
                    rates,
                    {
                        "tournament": tid,
                        "matches": len(collected),
                        "scheduled": len(specs),
                        "interrupted": signalled[0],
                    },
                )
        raise Interrupted(signalled[0], len(collected), len(specs), folder.path) from None
    except BaseException:
        if not collected:
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
    collected: list[MatchRecord],
    agent_env: dict[str, dict[str, str]],
    referee_login: Login,
    stop: asyncio.Event,
    collecting: list[bool],
) -> RunResult:
    if opts.config_path:
        try:
            shutil.copy(opts.config_path, folder.path / "tournament.toml")
        except OSError as exc:
            raise RunFolderError(
                f"cannot write to the run folder {folder.path}: {exc.strerror or exc}"
            ) from exc
    folder.write_schedule(specs)
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
        if llm_users:
            llm_server = LLMServerProcess(folder.path / "logs" / "llm-server.log")
            stack.callback(llm_server.stop)
            with console.status(f"Starting the embedded LLM server for {', '.join(llm_users)}..."):
                await llm_server.wait_ready()
            console.print(f"Embedded LLM server (llama.cpp, SmolLM2-135M) at {llm_server.base_url}")
            for n in llm_users:
                agent_options[n]["llm"] = {**agent_options[n].get("llm", {}), "base_url": llm_server.base_url}
        for name, acfg in config.agents.items():
            if acfg.external:
                continue
            for i in range(acfg.replicas):
                log_path = folder.path / "logs" / f"{name}-{i}.log"
                creds = agent_env.get(name)
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
        if opts.referee:
            await stack.enter_async_context(_workers(nc, subjects, config, opts, obs))

        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=opts.quiet,
        )
        with progress:
            bar = progress.add_task(f"{tid}", total=len(specs))

            def on_record(rec: MatchRecord) -> None:
                folder.append(rec)
                collected.append(rec)
                progress.advance(bar)

            def stalled() -> None:
                progress.console.print(
                    "[yellow]No referee has started a match yet: is `spielbus referee` running "
                    f"against {url}?[/yellow]"
                )

            collector = Collector(specs, on_record)
            collecting.append(True)
            try:
                records = await submit_and_collect(
                    nc,
                    specs,
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
            },
        )
        print_report(console, records, table, rates, str(folder.path))
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


@contextlib.asynccontextmanager
async def _workers(
    nc: NATS, subjects: Subjects, config: TournamentConfig, opts: RunOptions, obs: Observability
) -> AsyncIterator[list[RefereeWorker]]:
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
