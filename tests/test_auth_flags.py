"""`--auth DIR` on `spielbus referee`, `submit`, `agent` and `bot-check`, and `auth init --if-missing`:
each command logs in as its own user of the folder, wins over the environment's credentials, and
a wrong folder or a missing user is a usage error (exit 2) that names the folder and the user."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from bus.auth import AuthBundle, load_auth, write_auth
from bus.connect import connect
from bus.server import EmbeddedNats
from referee.worker import RefereeWorker
from spielbus.cli import main as spielbus
from spielbus.launch import agent_present
from tests.helpers import spec

ROOT = Path(__file__).resolve().parents[1]
TOURNAMENT = ROOT / "deploy" / "tournament.toml"


def _env(**extra: str) -> dict[str, str]:
    """The test environment without any NATS login of the developer's shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    # COLUMNS: rich would wrap long paths in the middle of the messages under test.
    return {**env, "PYTHONUNBUFFERED": "1", "COLUMNS": "400", **extra}


# A login in the environment that the server refuses: `--auth` must win over it.
STALE = {"NATS_USER": "stale", "NATS_PASSWORD": "wrong", "NATS_CREDS": "/nonexistent/stale.creds"}


def _cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "spielbus.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env or _env(), timeout=timeout)


# --- auth init --if-missing (the compose `auth-init` step) -----------------------------------


def test_if_missing_writes_once_then_keeps_the_passwords(tmp_path: Path) -> None:
    out = tmp_path / "auth"
    args = ["auth", "init", str(TOURNAMENT), "--out", str(out), "--if-missing"]
    assert spielbus(args) == 0
    first = (out / "auth.json").read_bytes()
    assert {u.agent for u in load_auth(out).users if u.role == "agent"} == {"random", "mcts", "llm"}
    assert spielbus(args) == 0, "a second run must succeed (compose restarts) ..."
    assert (out / "auth.json").read_bytes() == first, "... and keep the passwords in use"


def test_if_missing_refuses_a_folder_without_an_agent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "auth"
    write_auth(["random"], out)
    assert spielbus(["auth", "init", str(TOURNAMENT), "--out", str(out), "--if-missing"]) == 2
    text = " ".join(capsys.readouterr().out.split())  # rich wraps long lines
    assert str(out) in text and "'mcts'" in text and "--force" in text


def test_if_missing_and_force_exclude_each_other(tmp_path: Path) -> None:
    with pytest.raises(SystemExit) as exc:
        spielbus(["auth", "init", "--agents", "a", "--out", str(tmp_path), "--force", "--if-missing"])
    assert exc.value.code == 2


# --- bad folders and missing users: exit 2 before connecting ---------------------------------


def _without_referee(tmp_path: Path) -> Path:
    out = tmp_path / "noref"
    write_auth(["alice"], out)
    manifest = json.loads((out / "auth.json").read_text())
    manifest["users"] = [u for u in manifest["users"] if u["role"] != "referee"]
    (out / "auth.json").write_text(json.dumps(manifest))
    return out


@pytest.mark.parametrize(
    "command",
    [
        ["referee"],
        ["bot-check", "alice"],
        ["submit", str(TOURNAMENT)],
        ["agent", "random", "--name", "alice"],
    ],
    ids=lambda c: c[0],
)
def test_a_missing_folder_is_a_usage_error_naming_it(tmp_path: Path, command: list[str]) -> None:
    missing = tmp_path / "not-an-auth-folder"
    # Port 1: nothing listens there, so exit 2 (not 1) proves the folder is checked before connecting.
    res = _cli(*command, "--auth", str(missing), env=_env(NATS_URL="nats://127.0.0.1:1"))
    text = res.stdout + res.stderr
    assert res.returncode == 2, text
    assert str(missing / "auth.json") in text and "spielbus auth init" in text


def test_bot_check_needs_its_own_user_not_the_referees(tmp_path: Path) -> None:
    """A folder from before bot-check users existed: exit 2 naming the missing user, never the referee's."""
    out = tmp_path / "old"
    write_auth(["alice"], out)
    manifest = json.loads((out / "auth.json").read_text())
    manifest["users"] = [u for u in manifest["users"] if u["role"] != "botcheck"]
    (out / "auth.json").write_text(json.dumps(manifest))
    res = _cli("bot-check", "alice", "--auth", str(out), env=_env(NATS_URL="nats://127.0.0.1:1"))
    text = res.stdout + res.stderr
    assert res.returncode == 2, text
    assert "no bot-check user" in text and "auth init --force" in text


@pytest.mark.parametrize("command", [["referee"], ["submit", str(TOURNAMENT)]], ids=str)
def test_a_folder_without_the_referee_user_is_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    folder = _without_referee(tmp_path)
    res = _cli(*command, "--auth", str(folder), env=_env(NATS_URL="nats://127.0.0.1:1"))
    text = res.stdout + res.stderr
    assert res.returncode == 2, text
    assert str(folder) in text and "no referee user" in text


def test_an_agent_without_a_user_is_a_usage_error(auth_dir: Path) -> None:
    res = _cli("agent", "random", "--name", "mallory", "--auth", str(auth_dir))
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{auth_dir}: agent 'mallory' has no user" in res.stderr


def test_a_folder_for_another_prefix_is_a_usage_error(auth_dir: Path) -> None:
    res = _cli("agent", "random", "--name", "alice", "--prefix", "other", "--auth", str(auth_dir))
    assert res.returncode == 2 and "prefix 'spielbus', not 'other'" in res.stderr


# --- with the folder: the commands log in and play -------------------------------------------


async def test_an_explicit_login_wins_over_the_environment(
    auth_server: EmbeddedNats, bundle: AuthBundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k, v in STALE.items():
        monkeypatch.setenv(k, v)
    alice = bundle.agent("alice")
    nc = await connect(auth_server.url, name="t", user=alice.user, password=alice.password)
    await nc.close()


@asynccontextmanager
async def _agent(name: str, auth: Path, url: str) -> AsyncIterator[subprocess.Popen[str]]:
    """`spielbus agent random --name NAME --auth DIR`, with a stale login in its environment."""
    cmd = [sys.executable, "-m", "spielbus.cli", "agent", "random", "--name", name, "--auth", str(auth)]
    proc = subprocess.Popen(
        [*cmd, "--nats", url],
        cwd=ROOT,
        env=_env(**STALE),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert proc.stdout is not None
        seen: list[str] = []
        # Log lines (stderr, merged) may come first; EOF means the agent exited.
        while not seen or f"agent {name} (random) ready" not in seen[-1]:
            line = await asyncio.to_thread(proc.stdout.readline)
            assert line, f"agent {name} exited with {proc.wait()}:\n" + "".join(seen)
            seen.append(line)
        yield proc
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait, 30)


@pytest.mark.slow
async def test_agents_started_with_auth_play_and_pass_bot_check(
    auth_server: EmbeddedNats, auth_dir: Path, bundle: AuthBundle
) -> None:
    ref = bundle.referee()
    nc = await connect(auth_server.url, name="referee", user=ref.user, password=ref.password)
    try:
        async with _agent("alice", auth_dir, auth_server.url), _agent("bob", auth_dir, auth_server.url):
            assert await agent_present(nc, "alice", wait_s=5) and await agent_present(nc, "bob", wait_s=5)
            rec = await RefereeWorker(nc).play(spec("tic_tac_toe", ["alice", "bob"]))
            assert rec.faults == [] and rec.outcome in ("decisive", "draw"), rec
            # bot-check logs in as botcheck-alice with --auth, despite the stale login around it.
            out = await asyncio.to_thread(
                _cli,
                "bot-check",
                "alice",
                "--nats",
                auth_server.url,
                "--auth",
                str(auth_dir),
                "--games",
                "tic_tac_toe",
                "--concurrency",
                "3",
                env=_env(**STALE),
                timeout=180,
            )
            assert out.returncode == 0, out.stdout + out.stderr
    finally:
        await nc.close()


def test_if_missing_adds_bot_check_users_to_an_older_folder_keeping_every_password(tmp_path: Path) -> None:
    """A compose `auth` volume from before bot-check users existed: `up` adds them, nothing else changes."""
    out = tmp_path / "auth"
    write_auth(["random", "mcts", "llm"], out)
    manifest = json.loads((out / "auth.json").read_text())
    manifest["users"] = [u for u in manifest["users"] if u["role"] != "botcheck"]
    (out / "auth.json").write_text(json.dumps(manifest))
    before = {u["user"]: u["password"] for u in manifest["users"]}
    assert spielbus(["auth", "init", str(TOURNAMENT), "--out", str(out), "--if-missing"]) == 0
    after = load_auth(out)
    assert {u.user: u.password for u in after.users if u.user in before} == before
    assert {after.botcheck(n).user for n in ("random", "mcts", "llm")} == {
        "botcheck-random",
        "botcheck-mcts",
        "botcheck-llm",
    }
    assert "botcheck-llm" in (out / "nats-server.conf").read_text()
    assert "NATS_USER=botcheck-mcts" in (out / "botcheck" / "mcts.env").read_text()
    assert (out / "botcheck" / "mcts.env").stat().st_mode & 0o077 == 0
    first = (out / "auth.json").read_bytes()
    assert spielbus(["auth", "init", str(TOURNAMENT), "--out", str(out), "--if-missing"]) == 0
    assert (out / "auth.json").read_bytes() == first  # now complete: kept as it is
