"""Starting agent services as child processes for `spielbus run`, and waiting for them.

Agents run as separate processes (`python -m agents KIND --name ...`), exactly as
they would on another machine: the referee never imports agent code, and an
agent's CPU-bound search cannot stall the referee's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import nats.errors
from nats.aio.client import Client as NATS

from bus.process import die_with_parent, stop_process
from referee.config import AgentConfig


class AgentProcess:
    def __init__(
        self,
        name: str,
        cfg: AgentConfig,
        url: str,
        prefix: str,
        log_path: Path,
        replica: int,
        extra_env: dict[str, str] | None = None,
        metrics_port: int | None = None,
        options: dict[str, object] | None = None,
    ) -> None:
        self.name = name
        self.cfg = cfg
        self.log_path = log_path
        cmd = [
            sys.executable,
            "-m",
            "agents",
            cfg.kind,
            "--name",
            name,
            "--nats",
            url,
            "--prefix",
            prefix,
            "--max-concurrency",
            str(cfg.max_concurrency),
            "--options",
            json.dumps(cfg.options if options is None else options),
        ]
        # Each child serves its own metrics; `spielbus run` re-exports them on its one endpoint.
        self.metrics_port = metrics_port
        if metrics_port is not None:
            cmd += ["--metrics-port", str(metrics_port)]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        env = dict(os.environ)
        env.setdefault("PYTHONUNBUFFERED", "1")
        # Per-agent credentials (`spielbus run --auth`) replace whatever the parent process was given.
        env.update(extra_env or {})
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent
        )
        self.replica = replica

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 10.0) -> None:
        stop_process(self.proc, grace_s=timeout)
        self._log.close()

    def tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


async def agent_present(nc: NATS, name: str, wait_s: float = 0.5) -> bool:
    """Whether a micro service of that name is up with an endpoint: its `$SRV.INFO.<name>` lists
    one. (Not `$SRV.PING`: nats.micro answers pings as soon as the service is added, before its
    endpoints subscribe, so a turn sent right after a ping could find no responder.)"""
    try:
        msg = await nc.request(f"$SRV.INFO.{name}", b"", timeout=wait_s)
    except (nats.errors.NoRespondersError, nats.errors.TimeoutError, TimeoutError):
        return False
    try:
        info = json.loads(msg.data)
    except ValueError:
        return False
    return isinstance(info, dict) and bool(info.get("endpoints"))


async def wait_for_agents(
    nc: NATS, names: list[str], processes: list[AgentProcess], wait_s: float
) -> list[str]:
    """Wait until every named agent answers a ping; returns those still missing at the timeout.

    Raises RuntimeError at once if a child process we started has died.
    """
    loop = asyncio.get_running_loop()
    end = loop.time() + wait_s
    missing = list(names)
    while missing and loop.time() < end:
        for p in processes:
            if not p.alive():
                raise RuntimeError(
                    f"agent {p.name} ({p.cfg.kind}) exited with code {p.proc.returncode} during start-up; "
                    f"its log {p.log_path} ends:\n{p.tail()}"
                )
        still = []
        for name in missing:
            if not await agent_present(nc, name):
                still.append(name)
        missing = still
        if missing:
            await asyncio.sleep(0.2)
    return missing


def stop_all(processes: list[AgentProcess]) -> None:
    for p in processes:
        if p.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                p.proc.send_signal(signal.SIGTERM)
    for p in processes:
        p.stop()


def check_agent_options(
    agents: dict[str, tuple[str, dict[str, object]]], games: Sequence[str] = ()
) -> list[str]:
    """Validate each agent's kind and options in the agents package's own process (`--check`), and
    that it plays each of `games` (the tournament's: every agent plays every game).

    `agents` maps name -> (kind, options). Returns one problem line per bad agent. Run before
    anything starts, so a bad option in a tournament file is a bad file, not a dead child.
    """
    plays = ["--games", ",".join(games)] if games else []
    procs = {
        name: subprocess.Popen(
            [
                sys.executable,
                "-m",
                "agents",
                kind,
                "--name",
                name,
                "--options",
                json.dumps(options),
                "--check",
                *plays,
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name, (kind, options) in agents.items()
    }
    problems = []
    for name, proc in procs.items():
        _, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            lines = [ln for ln in err.strip().splitlines() if ln.strip()]
            message = lines[-1] if lines else f"exit code {proc.returncode}"
            problems.append(f"agents.{name}: {message.removeprefix('spielbus agent: ')}")
    return problems


class RefereeProcess:
    """One `spielbus referee` child of `spielbus run --workers N` (N > 1): a referee in its own
    interpreter, so refereeing can use a core of its own (the workers inside `spielbus run` share
    one interpreter and one connection). It pulls from the same work queue as any referee, logs
    in as the referee user with `--auth`, and on stop drains like any referee (SIGTERM: matches in
    flight are handed back)."""

    def __init__(
        self,
        url: str,
        prefix: str,
        log_path: Path,
        *,
        concurrency: int,
        absent_limit_s: float,
        drain_grace_s: float,
        auth_dir: str | None = None,
    ) -> None:
        self.log_path = log_path
        cmd = [
            sys.executable,
            "-m",
            "spielbus.cli",
            "referee",
            "--nats",
            url,
            "--prefix",
            prefix,
            "--concurrency",
            str(concurrency),
            "--absent-limit",
            str(absent_limit_s),
            "--drain-grace",
            str(drain_grace_s),
        ]
        if auth_dir is not None:
            cmd += ["--auth", auth_dir]
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.proc = subprocess.Popen(
            cmd, stdout=self._log, stderr=subprocess.STDOUT, env=env, preexec_fn=die_with_parent
        )

    # What `spielbus referee` prints once its worker is on the work queue.
    READY_LINE = b"referee worker on"

    def wait_ready(self, timeout_s: float) -> None:
        """Block until the child says its worker is on the work queue; `RuntimeError` with the log's
        tail if it exits first or is not up within `timeout_s` (a loaded machine imports slowly)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            text = self.log_path.read_bytes()
            if self.READY_LINE in text:
                return
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"referee process exited {self.proc.returncode} before it was ready: "
                    f"{text[-500:].decode(errors='replace')} (log: {self.log_path})"
                )
            time.sleep(0.1)
        raise RuntimeError(f"referee process not ready within {timeout_s:.0f} s (log: {self.log_path})")

    def stop(self, grace_s: float) -> None:
        stop_process(self.proc, grace_s=grace_s)
        self._log.close()
