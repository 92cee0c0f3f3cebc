"""`spielbus run` and `spielbus submit`: a whole tournament, embedded or against a running bus.

Embedded (no `--nats`, no or an empty `NATS_URL`): start a nats-server, every non-external
agent as a child process, and referee workers in this process; play; print; stop
everything. With `--nats`: use that server; agents marked `external` and, with
`--no-referee` (what `spielbus submit` does), the referee workers must already be there.
With `--auth DIR` (from `spielbus auth init`): the embedded server enforces that folder's
accounts; this process logs in as the referee and each child agent as its own user. An
embedded run with an external agent and no `--auth` makes its own accounts and prints each
bot's login file and command (spielbus/bot_logins.py); one with built-in agents only stays open.
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
import shlex
import shutil
import signal
import tempfile
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from nats.aio.client import Client as NATS
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from agents.human.seat import tell_player
from agents.llm.config import LLMConfig
from agents.llm.limits import LimiterService, entitlements, needs_limiter, serve_this_process
from agents.llm.preflight import preflight
from agents.llm.recording import RECORD_ENV, REPLAY_ENV, TAG_ENV
from bus.auth import config_path, login_for, user_env
from bus.connect import Login, connect
from bus.process import free_port
from bus.protocol import MatchRecord, MatchSpec
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects
from observability.web.serve import Observability, start_observability
from referee.collector import DEFAULT_IDLE_S, Collector, CollectStopped, submit_and_collect
from referee.config import ConfigError, TournamentConfig
from referee.presence import DEFAULT_ABSENT_LIMIT_S
from referee.resume import check_resumable
from referee.run_folder import RunFolder, RunFolderError, tournament_id
from referee.schedule import build_schedule
from referee.worker import DRAIN_GRACE_S, RefereeWorker
from spielbus.bot_logins import announce_bots, default_auth_dir
from spielbus.collect import read_records as read_stream_records
from spielbus.launch import AgentProcess, RefereeProcess, stop_all, wait_for_agents
from spielbus.llm_launch import LLM_KINDS, LLMServerProcess, needs_embedded_llm
from spielbus.report import RunNotes, report_run, write_interrupted_summary
from spielbus.seats import SeatPlan, plan_seats
from spielbus.sprt_run import SprtCollect

log = logging.getLogger(__name__)

# How long `--workers N` waits for each referee process to be on the work queue.
REFEREE_READY_S = 120.0


@dataclass
class RunOptions:
    """How to run a tournament: the command line of `spielbus run`/`submit` (spielbus/cli.py)."""

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
    # An auth folder from `spielbus auth init`: the server enforces its accounts.
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
    """A finished run: its records in schedule order, its run folder, the specs without a record
    (match id to reason), and the agents whose moves were mostly fallbacks (the run fails)."""

    records: list[MatchRecord]
    path: Path
    failed: dict[str, str] = field(default_factory=dict)
    # Agents over the fallback threshold, unless the tournament file allows that.
    fallbacks: list[str] = field(default_factory=list)
    # Built-in agents (started by this run) that lost matches on time: agent -> matches (the run fails).
    timeouts: dict[str, int] = field(default_factory=dict)


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


def resume_command(opts: RunOptions, folder: Path) -> str:
    """The exact command that continues this run in `folder` (printed on Ctrl-C and a full disk)."""
    parts = ["spielbus", "run", opts.config_path or "TOURNAMENT.toml", "--resume", str(folder)]
    if opts.nats:
        parts += ["--nats", opts.nats]
    return shlex.join(parts)


def _nats_url(opts: RunOptions) -> str | None:
    """`--nats`, else `NATS_URL`; an empty value means "none": start the embedded server."""
    return opts.nats or os.environ.get("NATS_URL") or None


async def run_tournament(
    config: TournamentConfig, opts: RunOptions, console: Console | None = None
) -> RunResult:
    """Run (or, without a referee, submit) a tournament: `TournamentSession(...).run()`."""
    return await TournamentSession(config, opts, console or Console()).run()


Phase = Literal["starting", "collecting", "reporting"]


class TournamentSession:
    """One run of a tournament, from its run folder to its report, with its parts as explicit state:
    the plan (`tid`, `specs`, `todo`, `folder`), the bus (`url`, `nc`), the agent processes, the
    referee workers, the collection (`collector`, `collected`), and how the run is being stopped
    (`phase`, `signal`, `stop`). `run` starts every part on one `AsyncExitStack`, so every part
    started is stopped on every way out: normal end, error, Ctrl-C or SIGTERM (raised as
    `Interrupted`). A run that fails before its first record leaves no run folder behind.

    Signals: while `phase` is `starting`, SIGINT/SIGTERM cancels the run; while `collecting`, the
    collector stops at its next step (`stop`: an exception, not a cancellation, as Python 3.11's
    wait_for can swallow a cancellation that meets a completed request and the run would go on);
    a second signal always cancels. Use one session for one run."""

    def __init__(self, config: TournamentConfig, opts: RunOptions, console: Console) -> None:
        if opts.referee and opts.workers < 1:
            raise ConfigError(f"--workers must be at least 1 (got {opts.workers}); use --no-referee for none")
        self.config = config
        self.opts = opts
        self.console = console
        self.subjects = Subjects(opts.prefix)
        self.bot_logins = False  # this run made its own accounts for an external bot (`_secure_default`)
        self.tid, self.specs, self.folder = self._plan()
        self.todo = self.specs  # less what a resumed run has recorded (`_connect`)
        # Matches recorded in the folder (a resumed run starts with those of the earlier runs).
        self.collected = len(self.folder.recorded_ids()) if opts.resume else 0
        self.phase: Phase = "starting"
        self.signal: str | None = None  # the first SIGINT/SIGTERM's name
        self.stop = asyncio.Event()
        self.url = _nats_url(opts)  # None: the embedded server's, once started
        self.processes: list[AgentProcess] = []
        # Set by `run` as it starts each part:
        self.nc: NATS
        self.obs: Observability
        self.collector: Collector
        self._task: asyncio.Task[object] | None = None
        self._progress: Progress | None = None
        self._bar: TaskID | None = None
        # Without a terminal the bar draws nothing: plain progress lines instead (`_progress_line`).
        self._plain = not (opts.quiet or console.is_terminal)
        self._plain_at = (0.0, -1)  # when and at which count the last plain line was printed
        self._started = time.monotonic()  # reset when collecting starts

    def _plan(self) -> tuple[str, list[MatchSpec], RunFolder]:
        """The tournament id, its schedule and its run folder: stored (`--resume`), replayed, or new."""
        opts, config = self.opts, self.config
        if opts.resume:
            # The stored schedule, not a new one: the same match ids, seeds and chance secrets.
            resume_dir = Path(opts.resume)
            tid = check_resumable(resume_dir, config, opts.config_path or "the tournament file")
            folder = RunFolder(resume_dir.parent, tid)
            self._secure_default(folder.path)
            try:
                return tid, folder.read_schedule() or [], folder
            except ValidationError as exc:
                folder.close()
                raise ConfigError(
                    f"--resume {resume_dir}: unreadable schedule.jsonl: {exc.errors()[:1]}"
                ) from exc
        if opts.replay_specs:
            tid = opts.replay_specs[0].tournament
            specs = opts.replay_specs
        else:
            tid = tournament_id(config)
            specs = build_schedule(config, tid)
        self._secure_default(Path(opts.run_dir or config.run_dir) / tid)
        # Fail before the folder exists if the referee or an agent we would launch has no user.
        self._logins()
        return tid, specs, RunFolder(opts.run_dir or config.run_dir, tid)

    def _secure_default(self, run_path: Path) -> None:
        """An embedded run with an external agent gets accounts (spielbus/bot_logins.py)."""
        if self.opts.auth_dir is None:
            made = default_auth_dir(self.config, _nats_url(self.opts) is None, run_path, self.opts.prefix)
            if made is not None:
                self.opts = replace(self.opts, auth_dir=made)
                self.bot_logins = True

    def _logins(self) -> tuple[Login, dict[str, dict[str, str]]]:
        """With `--auth`: the referee's login and each launched agent's environment (the errors name
        the folder and the user); without, none."""
        opts = self.opts
        if not opts.auth_dir:
            return {}, {}
        ref = login_for(opts.auth_dir, "referee", prefix=opts.prefix)
        agents = {
            n: user_env(login_for(opts.auth_dir, "agent", n))
            for n, a in self.config.agents.items()
            if not a.external
        }
        return {"user": ref.user, "password": ref.password}, agents

    async def run(self) -> RunResult:
        """Start, collect, report; stop everything. Raises `Interrupted` after SIGINT/SIGTERM."""
        self._task = asyncio.current_task()
        loop = asyncio.get_running_loop()
        # SIGTERM is handled like Ctrl-C: everything stops cleanly and the run folder stays.
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self._on_signal, sig.name)
        try:
            async with contextlib.AsyncExitStack() as stack:
                await self._start(stack)
                await self._collect(stack)
                return await self._report()
        except (asyncio.CancelledError, CollectStopped):
            if self.signal is None:
                raise
            self._discard_if_empty()
            self._write_interrupted_summary()
            raise Interrupted(self.signal, self.collected, len(self.specs), self.folder.path) from None
        except BaseException:
            self._discard_if_empty()
            raise
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
            self.folder.close()

    def _on_signal(self, name: str) -> None:
        second = self.signal is not None
        self.signal = self.signal or name
        self.stop.set()
        if (second or self.phase == "starting") and self._task is not None:
            self._task.cancel()

    def _discard_if_empty(self) -> None:
        """A run that stops before its first record leaves no run folder behind."""
        if not self.collected and not self.opts.resume:
            self.folder.close()
            shutil.rmtree(self.folder.path, ignore_errors=True)

    def _write_interrupted_summary(self) -> None:
        if self.folder.path.exists():
            with contextlib.suppress(Exception):
                write_interrupted_summary(self.folder, self.config, self.tid, self.specs, self.signal)

    # -- starting -----------------------------------------------------------------------------

    async def _start(self, stack: contextlib.AsyncExitStack) -> None:
        """The folder's header, the bus, observability, the LLM server, the agents, the workers."""
        self._write_header()
        referee_login, agent_env = self._logins()
        nc = await self._connect(stack, referee_login)
        if self.bot_logins and self.opts.auth_dir and self.url:
            announce_bots(self.console, self.config, self.opts.auth_dir, self.url)
        self.obs = await self._start_observability(stack, nc)
        agent_options = {
            n: self.config.agent_options(n) for n, a in self.config.agents.items() if not a.external
        }
        await self._start_llm_server(stack, agent_options)
        if needs_limiter(self.config.llm):
            # Provider limits shared by every agent naming an endpoint, across processes. Under
            # accounts, only the agents naming an endpoint may take its slots (agents/llm/limits.py).
            table = None
            if self.opts.auth_dir:
                table = entitlements({n: o["llm"] for n, o in agent_options.items() if "llm" in o})
            limiter = await LimiterService(nc, self.subjects.prefix, table).start()
            stack.push_async_callback(limiter.stop)
            serve_this_process(limiter)  # the pre-flight's request takes a slot too
            stack.callback(serve_this_process, None)
        await self._preflight(agent_options)
        # Human seats (docs/human.md): the token only on this console, the bare address on the page.
        seats = plan_seats(self.config, agent_options)
        self._start_agents(agent_options, agent_env, seats)
        await self._wait_for_agents(nc)
        for seat in seats.values():  # once their pages are up
            # The token on the terminal only; a piped or logged console gets a private file's path.
            private = self.folder.path / "seats" / f"{seat.agent}.url"
            line = tell_player(f"Seat of {seat.agent} (human)", seat, self.console.is_terminal, private)
            self.console.print(line, highlight=False, soft_wrap=True)  # one line: the address is copied whole
            if self.obs.web is not None:
                self.obs.web.seats.append({"agent": seat.agent, "url": seat.url})
        if self.opts.referee:
            await stack.enter_async_context(
                _workers(nc, self.subjects, self.config, self.opts, self.obs, self.folder.path / "logs")
            )

    def _write_header(self) -> None:
        """A new run's tournament.toml, schedule and run.json (a resumed run has them)."""
        if self.opts.resume:
            return
        if self.opts.config_path:
            try:
                shutil.copy(self.opts.config_path, self.folder.path / "tournament.toml")
            except OSError as exc:
                raise RunFolderError(
                    f"cannot write to the run folder {self.folder.path}: {exc.strerror or exc}"
                ) from exc
        self.folder.write_schedule(self.specs)
        self.folder.write_run_info(self.config)

    async def _connect(self, stack: contextlib.AsyncExitStack, login: Login) -> NATS:
        """The embedded server (unless `--nats`), the connection, and a resumed run's `todo`."""
        if self.url is None:
            embedded = EmbeddedNats(
                log_file=self.folder.path / "nats-server.log",
                config=config_path(self.opts.auth_dir) if self.opts.auth_dir else None,
            ).start()
            stack.callback(embedded.stop)
            self.url = embedded.url
            self.console.print(f"Embedded nats-server at {self.url}")
        nc = self.nc = await connect(self.url, name=f"spielbus-run-{self.tid}", **login)
        if self.opts.resume:
            self.todo = await self._resume_todo(nc)

        async def close_nc() -> None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(nc.drain(), 10)
            with contextlib.suppress(Exception):
                await nc.close()

        stack.push_async_callback(close_nc)
        stack.callback(stop_all, self.processes)
        return nc

    async def _start_observability(self, stack: contextlib.AsyncExitStack, nc: NATS) -> Observability:
        opts = self.opts
        obs = await start_observability(
            nc,
            self.subjects,
            metrics_port=opts.metrics_port,
            web_port=opts.web_port,
            host=opts.host,
            fallback=True,
            ratings_config=self.config.ratings,
            fallback_threshold=self.config.fallback_threshold,
            child_metrics=lambda: [
                f"http://127.0.0.1:{p.metrics_port}/metrics" for p in self.processes if p.metrics_port
            ],
        )
        stack.push_async_callback(obs.stop)
        for line in obs.where(closes=not self.opts.keep_serving):
            self.console.print(line, highlight=False, soft_wrap=True)
        return obs

    async def _start_llm_server(
        self, stack: contextlib.AsyncExitStack, agent_options: dict[str, dict[str, Any]]
    ) -> None:
        """The embedded LLM server, when an agent needs it (not while replaying a recording);
        those agents' options then point at it."""
        users = [n for n, o in agent_options.items() if needs_embedded_llm(self.config.agents[n].kind, o)]
        if not users or os.environ.get(REPLAY_ENV):
            return
        emb = self.config.embedded_llm
        server = LLMServerProcess(self.folder.path / "logs" / "llm-server.log", emb.server, emb.parallel)
        stack.callback(server.stop)
        with self.console.status(f"Starting the embedded LLM server for {', '.join(users)}..."):
            await server.wait_ready()
        self.console.print(
            f"Embedded LLM server ({emb.server}, {emb.parallel} slot(s), SmolLM2-135M) at {server.base_url}"
        )
        for n in users:
            agent_options[n]["llm"] = {**agent_options[n].get("llm", {}), "base_url": server.base_url}

    async def _preflight(self, agent_options: dict[str, dict[str, Any]]) -> None:
        """One real request per distinct LLM endpoint (agents/llm/preflight.py): a request the endpoint
        refuses stops the run (exit 2) before any match; an endpoint that is down is a warning."""
        if os.environ.get(REPLAY_ENV):
            return
        configs = {}
        for n, o in agent_options.items():
            if self.config.agents[n].kind in LLM_KINDS:
                with contextlib.suppress(ValueError):
                    configs[n] = LLMConfig.model_validate(o.get("llm") or {})
        if not configs:
            return
        with self.console.status("Checking the LLM endpoints (one request each)..."):
            problems = await preflight(configs)
        for p in problems:
            if not p.fatal:
                self.console.print(f"[yellow]warning:[/yellow] {p}", highlight=False, soft_wrap=True)
        fatal = [str(p) for p in problems if p.fatal]
        if fatal:
            raise ConfigError("\n".join(fatal))

    def _start_agents(
        self,
        agent_options: dict[str, dict[str, Any]],
        agent_env: dict[str, dict[str, str]],
        seats: dict[str, SeatPlan],
    ) -> None:
        """Every replica of every agent not marked `external`, as a child process."""
        assert self.url is not None
        for name, acfg in self.config.agents.items():
            if acfg.external:
                continue
            for i in range(acfg.replicas):
                # Every LLM request and response is kept in the run folder (agents/llm/recording.py).
                env = {
                    **agent_env.get(name, {}),
                    RECORD_ENV: str(self.folder.path.resolve() / "llm"),
                    TAG_ENV: f"{name}-{i}",
                    **(seats[name].env() if name in seats else {}),
                }
                self.processes.append(
                    AgentProcess(
                        name,
                        acfg,
                        self.url,
                        self.opts.prefix,
                        self.folder.path / "logs" / f"{name}-{i}.log",
                        i,
                        extra_env=env,
                        metrics_port=free_port() if self.opts.metrics_port is not None else None,
                        options=agent_options[name],
                    )
                )

    async def _wait_for_agents(self, nc: NATS) -> None:
        opts, agents = self.opts, list(self.config.agents)
        with self.console.status(f"Waiting for {len(agents)} agents to join the bus..."):
            missing = await wait_for_agents(nc, agents, self.processes, opts.agent_wait_s)
        if missing:
            self.console.print(
                f"[yellow]warning:[/yellow] agents not on the bus after {opts.agent_wait_s:.0f}s: "
                f"{', '.join(missing)}; their matches wait up to {opts.absent_limit_s:.0f}s for them "
                "(--absent-limit), then their turns are recorded as `no_responder`"
            )

    async def _resume_todo(self, nc: NATS) -> list[MatchSpec]:
        """The specs a resumed run still has to play: those without a record in the folder, less those
        whose record the match stream still holds (written to the folder first: a run killed between
        the stream and the folder loses nothing). An embedded server starts empty, so only the folder
        counts."""
        folder, specs = self.folder, self.specs
        done = folder.recorded_ids()
        todo = [s for s in specs if s.match_id not in done]
        if todo:
            await ensure_streams(nc.jetstream(), self.subjects)  # a fresh embedded server has none yet
            found, _ = await read_stream_records(nc, self.subjects, folder.path.name, todo)
            for s in todo:
                if s.match_id in found:
                    folder.append(found[s.match_id])
                    self.collected += 1
            todo = [s for s in todo if s.match_id not in found]
        self.console.print(
            f"Resuming {folder.path.name}: {len(specs) - len(todo)} of {len(specs)} matches recorded; "
            f"playing the other {len(todo)}",
            highlight=False,
        )
        return todo

    # -- collecting ---------------------------------------------------------------------------

    def _on_record(self, rec: MatchRecord) -> None:
        # Written to the folder and counted, never kept: the folder is the record.
        self.folder.append(rec)
        self.collected += 1
        if self._progress is not None and self._bar is not None:
            self._progress.advance(self._bar)
        if self._plain:
            self._progress_line()

    # A plain progress line at least this often, and at every 5% of the schedule.
    PLAIN_EVERY_S = 10.0

    def _progress_line(self) -> None:
        total, done = len(self.specs), self.collected
        now = time.monotonic()
        last_t, last_n = self._plain_at
        step = max(1, total // 20)
        if done < total and now - last_t < self.PLAIN_EVERY_S and done // step == last_n // step:
            return
        self._plain_at = (now, done)
        elapsed = now - self._started
        self.console.print(
            f"progress: {done}/{total} matches recorded ({elapsed:.0f} s)", highlight=False, soft_wrap=True
        )

    def _stalled(self) -> None:
        assert self._progress is not None
        self._progress.console.print(
            "[yellow]No referee has started a match yet: is `spielbus referee` running "
            f"against {self.url}?[/yellow]"
        )

    async def _collect(self, stack: contextlib.AsyncExitStack) -> None:
        """Submit the specs still to play and collect their records, with a progress bar."""
        progress = self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            disable=self.opts.quiet or self._plain,
        )
        self._started = time.monotonic()
        specs, todo, tid = self.specs, self.todo, self.tid
        with progress:
            bar = self._bar = progress.add_task(tid, total=len(specs), completed=len(specs) - len(todo))
            self.collector = Collector(todo, self._on_record, keep=False)
            self.phase = "collecting"
            # Everything built so far (modules, pydantic schemas, the schedule's specs, the
            # agents' and workers' state) lives as long as the run: moved out of the collector's
            # reach, a full collection walks only what play creates. Measured with
            # benchmarks/soak.py (10,000 matches): see docs/referee.md, "Soak".
            gc.freeze()
            stack.callback(gc.unfreeze)
            # format sprt: pair by pair until the test decides, the LLR on the progress bar.
            collect = (
                SprtCollect(
                    self.config,
                    lambda st: progress.update(bar, description=f"{tid} {st.short()}"),
                    schedule=specs,
                    prior=self.folder.read_records(specs) if self.opts.resume else None,
                )
                if self.config.format == "sprt"
                else submit_and_collect
            )
            try:
                await collect(
                    self.nc,
                    todo,
                    self.subjects,
                    self._on_record,
                    stall_warning=self._stalled,
                    deadline_s=self.opts.deadline_s,
                    idle_s=self.opts.idle_s,
                    collector=self.collector,
                    stop=self.stop,
                )
            except RunFolderError as exc:
                if _nats_url(self.opts) is None:  # the embedded bus stops with the run: nothing to collect
                    resume = resume_command(self.opts, self.folder.path)
                    again = f"`{resume}` plays the rest once there is room"
                else:
                    again = f"the bus keeps every record: `spielbus collect {tid}` rebuilds the run folder"
                raise RunFolderError(f"{exc}. Stopped; {again}") from exc
        self.phase = "reporting"

    # -- reporting ----------------------------------------------------------------------------

    async def _report(self) -> RunResult:
        """The summary files and the console report (spielbus/report.py), after play."""
        failed = dict(self.collector.failed)
        resumed = len(self.specs) - len(self.todo) if self.opts.resume else None
        records, fallback_agents, timeouts = report_run(
            self.console,
            self.folder,
            self.config,
            self.tid,
            self.specs,
            RunNotes(failed, self.collector.rejected, self.url, resumed),
        )
        if self.opts.keep_serving and self.obs.where():
            await _serve_until_signal(self.console, self.obs)
        return RunResult(
            records=records,
            path=self.folder.path,
            failed=failed,
            fallbacks=[] if self.config.allow_fallbacks else fallback_agents,
            timeouts=timeouts,
        )


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
