"""A service whose login the server stops accepting exits loudly (bus/connect.py), issue 41.

`spielbus auth init --force` and a nats-server reload replaced every password: the server closed
every connection, nats-py does not reconnect after an Authorization Violation, and the referee
exited 0 with nothing logged while an agent stayed up but deaf. Now both log the refusal and exit
with code 3 (EXIT_LOGIN_REFUSED), so a supervisor starts them again with the new login files.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bus.auth import load_auth, user_env, write_auth
from bus.connect import EXIT_LOGIN_REFUSED
from bus.server import EmbeddedNats
from tests.helpers import uid

ROOT = Path(__file__).resolve().parents[1]


def _start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **env}
    for key in ("NATS_CREDS", "NATS_USER", "NATS_PASSWORD", "NATS_INBOX_PREFIX"):
        if key not in env:
            full.pop(key, None)
    out = log.open("wb")
    return subprocess.Popen([sys.executable, "-m", "spielbus.cli", *argv], stdout=out, stderr=out, env=full)


def _wait_for(path: Path, text: str, proc: subprocess.Popen[bytes], within_s: float = 60) -> None:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, path.read_text(errors="replace")
        time.sleep(0.1)
    raise AssertionError(f"{text!r} never in {path}: {path.read_text(errors='replace')}")


def test_force_and_reload_ends_the_services_loudly(tmp_path: Path) -> None:
    name = uid("bot")
    folder = tmp_path / "auth"
    write_auth([name, "other"], folder)
    bundle = load_auth(folder)
    with EmbeddedNats(config=folder / "nats-server.conf") as srv:
        agent_log, referee_log = tmp_path / "agent.log", tmp_path / "referee.log"
        agent = _start(
            ["agent", "random", "--name", name, "--nats", srv.url], user_env(bundle.agent(name)), agent_log
        )
        referee = _start(
            ["--log-level", "INFO", "referee", "--nats", srv.url], user_env(bundle.referee()), referee_log
        )
        try:
            _wait_for(agent_log, "ready", agent)
            _wait_for(referee_log, "referee", referee)
            time.sleep(1)  # both connected and serving
            write_auth([name, "other"], folder, force=True)
            assert srv._proc is not None
            srv._proc.send_signal(signal.SIGHUP)  # nats-server reloads its configuration
            for proc, log in ((agent, agent_log), (referee, referee_log)):
                try:
                    code = proc.wait(60)
                except subprocess.TimeoutExpired:
                    raise AssertionError(f"still running, deaf: {log.read_text(errors='replace')}") from None
                text = log.read_text(errors="replace")
                assert code == EXIT_LOGIN_REFUSED, text
                assert "refused this login" in text, text
        finally:
            for proc in (agent, referee):
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
