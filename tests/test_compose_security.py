"""What the compose stack exposes by default, read from docker-compose.yml, .dockerignore and the
Grafana entrypoint itself (issue 40: every port on every interface, NATS without TLS, Grafana's
admin/admin, logins and env files not excluded from the build context).

The file is parsed (PyYAML) rather than started: tests/test_docker_stack.py runs the stack for
real. Where a `docker-compose` (or `docker compose`) is installed, its own `config` is checked too.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def _services() -> dict[str, Any]:
    doc = yaml.safe_load(COMPOSE.read_text())
    services: dict[str, Any] = doc["services"]
    return services


def test_every_published_port_is_bound_to_loopback() -> None:
    published = {
        name: [str(p) for p in svc.get("ports", [])] for name, svc in _services().items() if svc.get("ports")
    }
    assert {"nats", "prometheus", "grafana", "referee", "ladder"} <= set(published)
    open_ports = {n: p for n, ports in published.items() for p in ports if not p.startswith("127.0.0.1:")}
    assert open_ports == {}, f"published on every interface: {open_ports}"


def test_nats_runs_with_the_accounts_auth_init_writes() -> None:
    nats = _services()["nats"]
    command = nats["command"]
    assert command[command.index("-c") + 1] == "/auth/nats-server.conf"
    assert "auth:/auth:ro" in nats["volumes"]
    assert nats["depends_on"]["auth-init"]["condition"] == "service_completed_successfully"
    init = _services()["auth-init"]["command"]
    assert init[:3] == ["spielbus", "auth", "init"] and init[init.index("--out") + 1] == "/auth"


def _grafana_entry(tmp_path: Path, password: str | None) -> subprocess.CompletedProcess[str]:
    """Grafana's entrypoint as compose runs it (`$$` is compose's escape of `$`), with the image's
    /run.sh replaced by a stand-in that says it started."""
    entry = _services()["grafana"]["entrypoint"]
    assert entry[:2] == ["/bin/sh", "-c"]
    started = tmp_path / "run.sh"
    started.write_text("#!/bin/sh\necho grafana started\n")
    started.chmod(0o755)
    script = entry[2].replace("$$", "$").replace("/run.sh", str(started))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    if password is not None:
        env["GF_SECURITY_ADMIN_PASSWORD"] = password
    return subprocess.run(["/bin/sh", "-c", script, *entry[3:]], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("password", [None, "", "admin"], ids=["unset", "empty", "default"])
def test_grafana_refuses_to_start_with_the_default_password(tmp_path: Path, password: str | None) -> None:
    res = _grafana_entry(tmp_path, password)
    assert res.returncode != 0 and "grafana started" not in res.stdout
    assert "deploy/grafana.env" in res.stderr


def test_grafana_takes_its_password_from_an_env_file_the_user_creates(tmp_path: Path) -> None:
    grafana = _services()["grafana"]
    assert grafana["env_file"] == ["deploy/grafana.env"]
    assert "GF_SECURITY_ADMIN_PASSWORD" not in grafana.get("environment", {})
    res = _grafana_entry(tmp_path, "a-password-of-my-own")
    assert res.returncode == 0 and "grafana started" in res.stdout
    # Shipped: an example with no password (refused as it is); the real file is never committed.
    example = (ROOT / "deploy" / "grafana.env.example").read_text()
    assert "GF_SECURITY_ADMIN_PASSWORD=\n" in example
    tracked = subprocess.run(
        ["git", "ls-files", "--error-unmatch", "deploy/grafana.env"], cwd=ROOT, capture_output=True
    )
    assert tracked.returncode != 0
    assert "deploy/grafana.env" in (ROOT / ".gitignore").read_text().splitlines()


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether Docker's build context leaves `path` out: a pattern matches the path or one of its
    parent folders (`**/` at the start matches any depth). Enough for the exclusions used here."""
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    for pattern in patterns:
        if pattern.startswith("!"):
            continue
        if pattern.startswith("**/"):
            tail = pattern[3:]
            names = ["/".join(parts[i : j + 1]) for i in range(len(parts)) for j in range(i, len(parts))]
            if any(fnmatch.fnmatchcase(n, tail) for n in names):
                return True
        elif any(fnmatch.fnmatchcase(p, pattern) for p in prefixes):
            return True
    return False


@pytest.mark.parametrize(
    "secret",
    [
        "auth/auth.json",
        "auth/agents/mybot.env",
        "deploy/auth/nats-server.conf",
        "runs/t-1/auth/referee.env",
        ".env",
        "deploy/grafana.env",
        "deploy/ollama.env",
        "examples/bots/mybot.env",
    ],
)
def test_dockerignore_keeps_logins_and_env_files_out_of_the_image(secret: str) -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    patterns = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    assert _ignored(secret, patterns)
    # What the image needs still goes in.
    for needed in ("bus/auth.py", "pyproject.toml", "deploy/Dockerfile", "examples/tournament.toml"):
        assert not _ignored(needed, patterns), needed


def _compose_cli() -> list[str] | None:
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True)
        if probe.returncode == 0:
            return ["docker", "compose"]
    return None


def test_compose_config_needs_the_grafana_env_file_and_publishes_on_loopback(tmp_path: Path) -> None:
    cli = _compose_cli()
    if cli is None:
        pytest.skip("no docker-compose or `docker compose` here (the file is checked as YAML above)")
    # A copy of the compose file and what it names, so the test neither needs nor writes the
    # user's own deploy/grafana.env.
    shutil.copy(COMPOSE, tmp_path / "docker-compose.yml")
    (tmp_path / "deploy").mkdir()
    for sub in ("grafana", "prometheus"):
        shutil.copytree(ROOT / "deploy" / sub, tmp_path / "deploy" / sub)
    base = [*cli, "--project-directory", str(tmp_path), "-f", str(tmp_path / "docker-compose.yml")]
    missing = subprocess.run([*base, "config"], capture_output=True, text=True, cwd=tmp_path)
    assert missing.returncode != 0 and "grafana.env" in missing.stdout + missing.stderr
    (tmp_path / "deploy" / "grafana.env").write_text("GF_SECURITY_ADMIN_PASSWORD=mine-not-admin\n")
    ok = subprocess.run([*base, "config"], capture_output=True, text=True, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    for name, svc in yaml.safe_load(ok.stdout)["services"].items():
        for port in svc.get("ports", []):
            host_ip = port.get("host_ip") if isinstance(port, dict) else str(port).split(":")[0]
            assert host_ip == "127.0.0.1", (name, port)
