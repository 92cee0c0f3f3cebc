"""Bad input on the command line and in tournament files (issue 10, item 8): a clear message and
exit 2 before anything starts, never a traceback or a hang; SIGTERM with the bus down exits cleanly.
Real processes, real nats-servers."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bus.server import EmbeddedNats
from referee.config import match_count, parse_config
from referee.schedule import build_schedule, check_games

SPIELBUS = [sys.executable, "-m", "spielbus.cli"]
ROOT = Path(__file__).resolve().parents[1]

FILE = """
name = "{name}"
games_per_pairing = {gpp}
deadline_ms = 5000
[[games]]
name = "{game}"
params = {params}
[agents.r1]
kind = "random"
[agents.r2]
kind = "random"
"""


def _run(args: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    return subprocess.run(
        [*SPIELBUS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env
    )


def _file(
    tmp_path: Path, name: str = "v", gpp: int = 1, game: str = "tic_tac_toe", params: str = "{}"
) -> Path:
    path = tmp_path / "t.toml"
    path.write_text(FILE.format(name=name, gpp=gpp, game=game, params=params))
    return path


@pytest.mark.parametrize("rows", [-1, 0, 100000])
def test_bad_game_parameters_exit_2_naming_the_key(tmp_path: Path, rows: int) -> None:
    """rows=-1 throws, rows=0 crashes OpenSpiel (SIGSEGV), rows=100000 makes turns too big for the bus."""
    out = _run(
        [
            "run",
            str(_file(tmp_path, game="connect_four", params=f"{{ rows = {rows} }}")),
            "--run-dir",
            str(tmp_path / "runs"),
        ]
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert "games[0]" in out.stdout and f"rows={rows}" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "runs").exists()  # nothing started


def test_a_huge_schedule_is_refused_with_its_cost(tmp_path: Path) -> None:
    out = _run(["run", str(_file(tmp_path, gpp=10**6)), "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 2
    assert "2,000,000 matches" in out.stdout and "max_matches" in out.stdout and "GB" in out.stdout
    assert not (tmp_path / "runs").exists()
    # 10**9 fails the same way, at once (no list of a billion specs is ever built).
    out = _run(["run", str(_file(tmp_path, gpp=10**9)), "--run-dir", str(tmp_path / "runs")], timeout=60)
    assert out.returncode == 2 and "2,000,000,000 matches" in out.stdout


THREE = """
games_per_pairing = 3
{top}
[[games]]
name = "tic_tac_toe"
[[games]]
name = "kuhn_poker"
params = {{ players = 3 }}
[agents.r1]
kind = "random"
[agents.r2]
kind = "random"
[agents.r3]
kind = "random"
[agents.r4]
kind = "random"
"""


@pytest.mark.parametrize(
    "top", ["", 'format = "gauntlet"\nchampions = ["r1", "r2"]', "both_seat_orders = false"]
)
def test_match_count_equals_the_schedule(top: str) -> None:
    config = parse_config(THREE.format(top=top))
    assert match_count(config, check_games(config)) == len(build_schedule(config, "c-1"))


def test_a_5000_character_name_is_a_message(tmp_path: Path) -> None:
    out = _run(["run", str(_file(tmp_path, name="n" * 5000)), "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 2 and "name" in out.stdout and "at most 64" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr
    agent = _run(["agent", "random", "--name", "a" * 5000, "--nats", "nats://127.0.0.1:1"], timeout=60)
    assert agent.returncode == 2 and "at most 128" in agent.stderr and "Traceback" not in agent.stderr


@pytest.mark.parametrize("value", ["-1", "0"])
def test_referee_concurrency_below_one_exits_2(value: str) -> None:
    out = _run(["referee", "--nats", "nats://127.0.0.1:1", "--concurrency", value], timeout=60)
    assert out.returncode == 2 and "--concurrency" in out.stderr and "Traceback" not in out.stderr


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield s.getsockname()[1]


@pytest.mark.parametrize(
    ("cmd", "flag"),
    [
        (["referee"], "--metrics-port"),
        (["referee"], "--web-port"),
        (["agent", "random", "--name", "busyport"], "--metrics-port"),
    ],
)
def test_a_busy_port_is_a_message(nats_url: str, busy_port: int, cmd: list[str], flag: str) -> None:
    out = _run([*cmd, "--nats", nats_url, flag, str(busy_port)], timeout=60)
    assert out.returncode == 2, out.stderr
    assert f"{flag} {busy_port}" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.slow
def test_sigterm_while_the_bus_is_down_exits_cleanly() -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = EmbeddedNats().start()
    procs = []
    try:
        for cmd in (
            ["referee", "--nats", server.url, "--web-port", "0", "--metrics-port", "0"],
            ["agent", "random", "--name", "sigterm-down", "--nats", server.url],
        ):
            p = subprocess.Popen(
                [*SPIELBUS, *cmd],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            procs.append(p)
        for p in procs:
            assert p.stdout is not None and p.stdout.readline()  # up and connected
    finally:
        server.stop()  # the bus goes away; both keep trying to reconnect
    for p in procs:
        p.send_signal(signal.SIGTERM)
    for p in procs:
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 0, err[-2000:]
        assert "Traceback" not in err
