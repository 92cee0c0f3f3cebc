"""`spielbus run` and `spielbus submit`: a whole tournament, embedded or against a running bus.

Embedded (no `--nats`, no `NATS_URL`): start a nats-server, every non-external
agent as a child process, and referee workers in this process; play; print; stop
everything. With `--nats`: use that server; agents marked `external` and, with
`--no-referee` (what `spielbus submit` does), the referee workers must already be there.
With `--auth DIR` (from `spielbus auth init`): the embedded server enforces that folder's
users; this process logs in as the referee and each child agent as its own user.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import signal
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bus.auth import config_path, login_for, user_env
from bus.connect import connect
from bus.process import free_port
from bus.protocol import MatchRecord
from bus.server import EmbeddedNats
from bus.subjects import Subjects
from observability.web.serve import Observability, start_observability
from referee.config import TournamentConfig
from referee.schedule import build_schedule
from referee.tournament import RunFolder, submit_and_collect, summarize, tournament_id
from referee.worker import RefereeWorker
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
    keep_serving: bool = False
    # An auth folder from `spielbus auth init`: the server enforces its users and permissions.
    auth_dir: str | None = None


@dataclass
class RunResult:
    records: list[MatchRecord]
    path: Path


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


async def run_tournament(
    config: TournamentConfig, opts: RunOptions, console: Console | None = None
) -> RunResult:
    console = console or Console()
    tid = tournament_id(config)
    specs = build_schedule(config, tid)
    agent_env: dict[str, dict[str, str]] = {}
    referee_login: dict[str, str] = {}
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
    if opts.config_path:
        shutil.copy(opts.config_path, folder.path / "tournament.toml")
    subjects = Subjects(opts.prefix)
    url = opts.nats or os.environ.get("NATS_URL")
    embedded: EmbeddedNats | None = None
    processes: list[AgentProcess] = []
    llm_server: LLMServerProcess | None = None
    workers: list[RefereeWorker] = []
    worker_tasks: list[asyncio.Task[None]] = []
    nc = None
    obs = Observability()
    try:
        if url is None:
            embedded = EmbeddedNats(
                log_file=folder.path / "nats-server.log",
                config=config_path(opts.auth_dir) if opts.auth_dir else None,
            ).start()
            url = embedded.url
            console.print(f"Embedded nats-server at {url}")
        nc = await connect(url, name=f"spielbus-run-{tid}", **referee_login)
        obs = await start_observability(
            nc,
            subjects,
            metrics_port=opts.metrics_port,
            web_port=opts.web_port,
            fallback=True,
            ratings_config=config.ratings,
            child_metrics=lambda: [
                f"http://127.0.0.1:{p.metrics_port}/metrics" for p in processes if p.metrics_port
            ],
        )
        for line in obs.where():
            console.print(line, highlight=False)
        agent_options = {n: config.agent_options(n) for n, a in config.agents.items() if not a.external}
        llm_users = [n for n, o in agent_options.items() if needs_embedded_llm(config.agents[n].kind, o)]
        if llm_users:
            llm_server = LLMServerProcess(folder.path / "logs" / "llm-server.log")
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
                f"{', '.join(missing)}; their turns will be recorded as `no_responder`"
            )
        if opts.referee:
            for _ in range(opts.workers):
                w = RefereeWorker(nc, subjects=subjects, concurrency=config.concurrency)
                if obs.metrics is not None:
                    w.publisher.listeners.append(obs.metrics.on_event)
                workers.append(w)
                worker_tasks.append(asyncio.create_task(w.run()))

        progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            disable=opts.quiet,
        )
        with progress:
            task = progress.add_task(f"{tid}", total=len(specs))

            def on_record(rec: MatchRecord) -> None:
                folder.append(rec)
                progress.advance(task)

            def stalled() -> None:
                progress.console.print(
                    "[yellow]No referee has started a match yet: is `spielbus referee` running "
                    f"against {url}?[/yellow]"
                )

            records = await submit_and_collect(nc, specs, subjects, on_record, stall_warning=stalled)
        table, rates = summarize(records, config)
        folder.write_summary(
            table,
            rates,
            {"tournament": tid, "matches": len(records), "scheduled": len(specs), "nats": url},
        )
        print_report(console, records, table, rates, str(folder.path))
        if opts.keep_serving and obs.where():
            await _serve_until_signal(console, obs)
        return RunResult(records=records, path=folder.path)
    finally:
        for w in workers:
            w.stop()
        if worker_tasks:
            await asyncio.gather(*worker_tasks, return_exceptions=True)
        await obs.stop()
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.drain()
        stop_all(processes)
        if llm_server is not None:
            llm_server.stop()
        if embedded is not None:
            embedded.stop()
        folder.close()
