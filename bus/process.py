"""Child processes every Spielbus part starts (nats-server, agents, the LLM server): one way to
bind a free port, stop a child, tie it to its parent's life, and ask an HTTP endpoint whether it is
up. Pure standard library, so any package may use it."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request


def free_port(host: str = "127.0.0.1") -> int:
    """A port that was free on `host` a moment ago (the usual race applies: bind it soon)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def die_with_parent() -> None:
    """`preexec_fn` for child services: the child gets a session of its own, and on Linux it is
    sent SIGTERM when its parent dies, so a killed `spielbus run` (SIGKILL, a crashed test) leaves
    no agent, LLM or NATS server behind.

    The session: a terminal's Ctrl-C signals the whole foreground process group. Children in it
    (the embedded nats-server, the agents) quit at once while the parent was still draining its
    matches, which then lost their bus or agent mid-move; now only the parent is signalled, and
    it stops its children in order once the drain is done.

    The death signal is Linux only (elsewhere the parent's own clean shutdown still stops its
    children). Linux ties it to the spawning *thread*: start children from a long-lived thread
    (the main one), never from a worker thread."""
    with contextlib.suppress(OSError):  # already a session or group leader: nothing to leave
        os.setsid()
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def stop_process(proc: subprocess.Popen[bytes] | subprocess.Popen[str] | None, grace_s: float = 10.0) -> None:
    """SIGTERM, wait up to `grace_s` for a clean exit (services drain on SIGTERM), then SIGKILL."""
    if proc is None or proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def http_ok(url: str, timeout_s: float = 2.0) -> bool:
    """Whether `url` answers 200: the readiness probe of the HTTP services we start."""
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:
            return bool(resp.status == 200)
    except (urllib.error.URLError, OSError, ValueError):
        return False
