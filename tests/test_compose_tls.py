"""The compose stack over TLS (docker-compose.tls.yml), read rather than started, and its `auth-init`
command run as a local process against a real nats-server (issue 41: the compose deployment can run
with TLS). Where a `docker compose` is installed its own `config` of both files is checked too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from bus.auth import load_auth, read_login_file
from bus.connect import connect
from bus.server import EmbeddedNats
from tests.test_compose_security import _compose_cli, _ignored

ROOT = Path(__file__).resolve().parents[1]


def _services(name: str) -> dict[str, Any]:
    services: dict[str, Any] = yaml.safe_load((ROOT / name).read_text())["services"]
    return services


def test_every_service_on_the_bus_verifies_the_servers_certificate() -> None:
    base, tls = _services("docker-compose.yml"), _services("docker-compose.tls.yml")
    on_bus = {n for n, s in base.items() if "NATS_URL" in (s.get("environment") or {})}
    assert on_bus >= {"referee", "ladder", "tournament"}
    verified = {
        n for n, s in tls.items() if (s.get("environment") or {}).get("NATS_TLS_CA") == "/auth/tls/ca.pem"
    }
    assert on_bus == verified, f"on the bus without the CA: {on_bus - verified}"
    assert set(tls) <= set(base), "the override names a service the stack does not have"


def test_auth_init_adds_tls_to_the_same_command() -> None:
    base = _services("docker-compose.yml")["auth-init"]["command"]
    tls = _services("docker-compose.tls.yml")["auth-init"]["command"]
    assert tls[: len(base)] == base
    extra = tls[len(base) :]
    assert "nats" in extra[extra.index("--tls-generate") + 1].split(",")  # the name services use
    assert extra[extra.index("--nats") + 1] == "tls://nats:4222"


async def test_the_auth_init_command_makes_a_tls_bus(tmp_path: Path) -> None:
    """The override's `auth-init` command, /auth replaced by a folder here, run twice (a later `up`):
    the second run keeps the passwords and the certificate; nats-server serves TLS with it."""
    argv = _services("docker-compose.tls.yml")["auth-init"]["command"]
    assert argv[0] == "spielbus"
    out = tmp_path / "auth"
    argv = [str(out) if a == "/auth" else a for a in argv[1:]]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, "-m", "spielbus.cli", *argv], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stdout + done.stderr
        if _ == 0:
            first = (load_auth(out).referee().password, (out / "tls" / "ca.pem").read_text())
    assert (load_auth(out).referee().password, (out / "tls" / "ca.pem").read_text()) == first
    conf = json.loads((out / "nats-server.conf").read_text().split("\n", 5)[-1])
    assert "tls" in conf
    login = read_login_file(out / "referee.env")
    assert login["NATS_URL"] == "tls://nats:4222" and login["NATS_TLS_CA"].endswith("tls/ca.pem")
    with EmbeddedNats(config=out / "nats-server.conf") as srv:
        nc = await connect(
            srv.url, name="t", user="referee", password=login["NATS_PASSWORD"], tls_ca=login["NATS_TLS_CA"]
        )
        assert nc.is_connected and nc.connected_server_version.major >= 2
        await nc.close()


@pytest.mark.parametrize(
    "secret", ["auth/registry.json", "bots/mybot.creds", "bots/mybot.seeds", "auth/tls/server-key.pem"]
)
def test_dockerignore_keeps_keys_and_bot_logins_out(secret: str) -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    assert _ignored(secret, [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")])


def test_compose_config_of_both_files(tmp_path: Path) -> None:
    """`docker compose -f docker-compose.yml -f docker-compose.tls.yml config`: the merged stack has
    the CA in every bus service's environment beside its NATS_URL, and auth-init's TLS command."""
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no docker compose here: the files were checked as YAML above")
    for name in ("docker-compose.yml", "docker-compose.tls.yml"):
        shutil.copy(ROOT / name, tmp_path / name)
    (tmp_path / "deploy").mkdir()
    for sub in ("grafana", "prometheus"):
        shutil.copytree(ROOT / "deploy" / sub, tmp_path / "deploy" / sub)
    (tmp_path / "deploy" / "grafana.env").write_text("GF_SECURITY_ADMIN_PASSWORD=mine-not-admin\n")
    files = ["-f", str(tmp_path / "docker-compose.yml"), "-f", str(tmp_path / "docker-compose.tls.yml")]
    ok = subprocess.run(
        [*cli, "--project-directory", str(tmp_path), *files, "config"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert ok.returncode == 0, ok.stderr
    merged = yaml.safe_load(ok.stdout)["services"]
    for name in ("referee", "ladder", "random", "tournament"):
        env = merged[name]["environment"]
        assert env["NATS_TLS_CA"] == "/auth/tls/ca.pem" and env["NATS_URL"] == "nats://nats:4222", name
    assert "--tls-generate" in merged["auth-init"]["command"]
