"""What can be checked of the Docker deployment without Docker: the compose file validates
(Debian's docker-compose 1.29), Prometheus' config passes promtool, a real Prometheus scrapes a
real `spielbus run`, and every compose service command is a real `spielbus` command that starts
here with the same arguments, NATS accounts included (`auth-init`, `nats -c`, `--auth /auth`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from bus.auth import config_path, load_auth
from bus.process import free_port, http_ok
from bus.server import EmbeddedNats

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "docker-compose.yml"
GPU = ROOT / "docker-compose.gpu.yml"
PROM_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"
OFFLINE = ROOT / "deploy" / "offline" / "docker-compose.offline.yml"
# The auth folder: a named volume in compose, written by the one-shot `auth-init` service.
AUTH = "/auth"
ONE_SHOT = {"auth-init", "tournament"}


def _tool(name: str, package: str) -> str:
    path = shutil.which(name)
    if path:
        return path
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip(f"{name} is missing and `make system-deps` cannot install it here (not root/apt)")
    pytest.fail(f"{name} is missing: run `make system-deps` (installs Debian's {package})")


def _interpolate(text: str) -> str:
    """Compose's `${VAR:-default}` with every variable unset: the file as `docker compose up` reads it."""
    return re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", lambda m: m.group(1), text)


def _compose() -> dict:
    return yaml.safe_load(_interpolate(COMPOSE.read_text()))


def test_compose_file_validates(tmp_path: Path) -> None:
    dc = _tool("docker-compose", "docker-compose")
    # Copies beside the Grafana env file the user creates (the stack does not start without it).
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "grafana.env").write_text("GF_SECURITY_ADMIN_PASSWORD=not-the-default\n")
    for files in ([COMPOSE], [COMPOSE, GPU]):
        copies = [Path(shutil.copy(f, tmp_path / f.name)) for f in files]
        args = [x for f in copies for x in ("-f", str(f))]
        out = subprocess.run([dc, *args, "config", "-q"], capture_output=True, text=True, cwd=tmp_path)
        assert out.returncode == 0, out.stderr


def test_compose_has_the_services_of_the_issue() -> None:
    services = _compose()["services"]
    from referee.config import load_config

    agents = set(load_config(ROOT / "deploy" / "tournament.toml").agents)
    assert {"nats", "ollama", "ollama-pull", "prometheus", "grafana", "referee", "tournament"} <= set(
        services
    )
    assert agents <= set(services), "one service per agent of deploy/tournament.toml"
    assert "-js" in services["nats"]["command"] and "healthcheck" in services["nats"]
    assert "healthcheck" in services["ollama"]
    # A real LLM by default (the embedded server), Ollama only with --profile ollama.
    assert services["llm-server"]["command"][:3] == ["spielbus", "llm", "serve"]
    assert "profiles" not in services["llm-server"] and services["ollama"]["profiles"] == ["ollama"]
    assert services["llm"]["depends_on"]["llm-server"]["condition"] == "service_healthy"
    for name, svc in services.items():
        if (svc.get("command") or [])[:1] == ["spielbus"] and svc.get("restart") != "no":
            assert "healthcheck" in svc, f"{name}: a long-running Spielbus service needs a healthcheck"
    # CPU-only hosts start the default file: the GPU reservation lives in the override only.
    assert "deploy" not in services["ollama"]
    gpu = yaml.safe_load(GPU.read_text())["services"]["ollama"]
    assert gpu["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]
    assert services["tournament"]["command"][:3] == ["spielbus", "submit", "deploy/tournament.toml"]


def test_compose_uses_nats_accounts() -> None:
    """Issue 6: the compose deployment enforces `spielbus auth init`'s users and permissions."""
    services = _compose()["services"]
    init = services["auth-init"]
    assert init["command"][:4] == ["spielbus", "auth", "init", "deploy/tournament.toml"]
    assert _arg(init["command"], "--out") == AUTH and "--if-missing" in init["command"]
    assert init["restart"] == "no" and f"auth:{AUTH}" in init["volumes"]
    nats = services["nats"]
    assert _arg(nats["command"], "-c") == f"{AUTH}/nats-server.conf"
    assert {"-js", "-m"} <= set(nats["command"]) and f"auth:{AUTH}:ro" in nats["volumes"]
    assert nats["depends_on"]["auth-init"]["condition"] == "service_completed_successfully"
    for name, svc in services.items():
        cmd = svc.get("command") or []
        if cmd[:1] != ["spielbus"] or name == "auth-init" or cmd[:3] == ["spielbus", "llm", "serve"]:
            continue  # auth-init writes the accounts; the LLM server never touches NATS
        assert _arg(cmd, "--auth") == AUTH, f"{name} does not log in with --auth {AUTH}"
        assert f"auth:{AUTH}:ro" in svc["volumes"], f"{name} does not mount the auth volume read-only"
        assert svc["depends_on"]["nats"]["condition"] == "service_healthy"
        assert not {"NATS_USER", "NATS_PASSWORD", "NATS_CREDS"} & set(svc.get("environment", {}))


def test_compose_runs_the_analyst() -> None:
    """Issue 42: the stack scores every match as it ends (`spielbus analyst` on the stack's NATS,
    logged in as the referee so that it may publish live verdicts), into the volume the run folders
    go to, and the ladder's leaderboard reads that file. Its metrics port is scraped (the Prometheus
    test below covers every service with one)."""
    services = _compose()["services"]
    analyst = services["analyst"]
    cmd = analyst["command"]
    assert cmd[:2] == ["spielbus", "analyst"] and _arg(cmd, "--auth") == AUTH
    assert "--metrics-port" in cmd and _arg(cmd, "--host") == "0.0.0.0"
    runs_volume, runs_dir = next(
        v.split(":")[:2] for v in services["tournament"]["volumes"] if v.split(":")[1] == "/app/runs"
    )
    assert _arg(services["tournament"]["command"], "--run-dir") == runs_dir
    out = _arg(cmd, "--out")
    assert out.startswith(runs_dir + "/"), "the analysis goes beside the run folders"
    assert f"{runs_volume}:{runs_dir}" in analyst["volumes"], "the analyst writes into the runs volume"
    assert _arg(services["ladder"]["command"], "--analysis") == out
    assert f"{runs_volume}:{runs_dir}:ro" in services["ladder"]["volumes"]


def test_dockerfile_pins_the_llama_cpp_of_pyproject() -> None:
    """The image compiles llama.cpp in a layer of its own; its pin must be the `local` extra's."""
    import tomllib

    pin = re.search(r"ARG LLAMA_CPP=(\S+)", (ROOT / "deploy" / "Dockerfile").read_text())
    assert pin is not None
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["local"]
    assert pin.group(1) in extra


def test_image_installs_every_engine_an_agent_needs() -> None:
    """The one image runs the referee and every agent: each Debian package an agent's install hint
    names (`apt-get install stockfish`, `gnugo`: the gnugo agent and the report's dead-stone-aware
    Go score) is installed in the Dockerfile's runtime stage, not only on the test machine."""
    runtime = (ROOT / "deploy" / "Dockerfile").read_text().rsplit("\nFROM ", 1)[1]
    installed = {
        pkg
        for m in re.finditer(r"apt-get install -y --no-install-recommends ([^&\\]+)", runtime)
        for pkg in m.group(1).split()
    }
    hints = {
        m.group(1)
        for src in (ROOT / "agents").glob("*.py")
        for m in re.finditer(r"`apt-get install ([a-z0-9.+-]+)`", src.read_text())
    }
    assert {"stockfish", "gnugo"} <= hints
    assert hints <= installed, f"the runtime stage lacks {sorted(hints - installed)}"


def _arg(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


def _local(cmd: list[str], paths: dict[str, str]) -> list[str]:
    """A compose command with its volume paths (the values of these flags) pointed at local folders:
    the only arguments a local run changes."""
    out = list(cmd)
    for flag, value in paths.items():
        if flag in out:
            out[out.index(flag) + 1] = value
    return out


def test_prometheus_config_passes_promtool_and_scrapes_every_service() -> None:
    promtool = _tool("promtool", "prometheus")
    out = subprocess.run([promtool, "check", "config", str(PROM_CONFIG)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    targets = {
        t
        for job in yaml.safe_load(PROM_CONFIG.read_text())["scrape_configs"]
        for sc in job["static_configs"]
        for t in sc["targets"]
    }
    for name, svc in _compose()["services"].items():
        cmd = svc.get("command") or []
        if cmd[:1] == ["spielbus"] and "--metrics-port" in cmd:
            port = cmd[cmd.index("--metrics-port") + 1]
            assert f"{name}:{port}" in targets, f"Prometheus does not scrape {name}:{port}"


def test_offline_override_puts_every_service_on_the_host_network() -> None:
    """deploy/offline/compose.sh (the Docker stack test's way up): every service shares the daemon's
    network and every name Prometheus scrapes resolves to it. A service the override leaves out
    lands on a bridge network of its own, where `nats` does not resolve and Prometheus cannot reach
    it: the `ladder` service's target was never up for that reason."""
    offline = yaml.safe_load(OFFLINE.read_text())
    names = {host.split(":")[0] for host in offline["x-names"]}
    for name, svc in _compose()["services"].items():
        if svc.get("profiles"):
            continue  # opt-in (Ollama): not part of the offline stack
        assert (offline["services"].get(name) or {}).get("network_mode") == "host", (
            f"{name} is not on the host network in {OFFLINE.name}"
        )
    scraped = {
        t.rsplit(":", 1)[0]
        for job in yaml.safe_load(PROM_CONFIG.read_text())["scrape_configs"]
        for sc in job["static_configs"]
        for t in sc["targets"]
    }
    assert scraped - {"localhost"} <= names, f"Prometheus targets without a name: {scraped - names}"


def _spielbus_services() -> dict[str, list[str]]:
    return {
        name: svc["command"]
        for name, svc in _compose()["services"].items()
        if isinstance(svc.get("command"), list) and svc["command"][:1] == ["spielbus"]
    }


def _start(cmd: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    # `spielbus` as installed in this environment, with exactly the compose arguments.
    exe = str(Path(sys.executable).parent / "spielbus")
    return subprocess.Popen(
        [exe, *cmd[1:]], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _wait_line(proc: subprocess.Popen[str], pattern: str) -> list[str]:
    """Read output until a line matches; fail if the process exits first."""
    assert proc.stdout is not None
    seen = []
    for line in proc.stdout:
        seen.append(line.rstrip())
        if re.search(pattern, line):
            return seen
    pytest.fail(f"exited with {proc.wait()} before printing {pattern!r}:\n" + "\n".join(seen[-30:]))


def _unused_port(taken: set[str]) -> str:
    while (port := str(free_port())) in taken:
        pass
    taken.add(port)
    return port


def _total(result: list[dict]) -> float:
    return sum(float(r["value"][1]) for r in result)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.read().decode()


@pytest.mark.slow
@pytest.mark.timeout(600)  # seven process starts and a model load; at load 8 one at a time took over 300 s
def test_compose_service_commands_start_here(tmp_path: Path) -> None:
    """The compose stack as local processes: every long-running `spielbus` service starts with its
    compose arguments, serves its metrics port, and the one-shot `tournament` command submits the
    default tournament to them. Then all get SIGTERM and must exit cleanly."""
    services = _spielbus_services()
    assert {"auth-init", "referee", "random", "mcts", "llm", "tournament", "analyst"} <= set(services)
    auth = tmp_path / "auth"
    paths = {"--out": str(auth), "--auth": str(auth), "--run-dir": str(tmp_path / "runs")}
    # The analyst's folder (its --out, the ladder's --analysis): in the runs volume in compose.
    analysis = tmp_path / "runs" / "analysis"
    # No login from the developer's shell: every service must log in through --auth alone.
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env["PYTHONUNBUFFERED"] = "1"
    _auth_init(_local(services["auth-init"], paths), env, auth)
    nats = _compose()["services"]["nats"]
    monitor = free_port()
    log = tmp_path / "nats-server.log"
    with EmbeddedNats(config=config_path(auth), monitor_port=monitor, log_file=log) as srv:
        # The compose healthcheck's URL: the monitoring port answers without a login.
        health = next(a for a in nats["healthcheck"]["test"] if a.startswith("http://"))
        assert "ok" in _scrape(health.replace(":8222/", f":{monitor}/"))
        # NATS_URL, OPENAI_BASE_URL and OLLAMA_HOST come from the environment, as in compose; nothing
        # listens on the Ollama port here (an opt-in profile), which the LLM agent must survive.
        env.update(NATS_URL=srv.url, OLLAMA_HOST=f"http://127.0.0.1:{free_port()}")
        procs: dict[str, subprocess.Popen[str]] = {}
        local_cmds: dict[str, list[str]] = {}
        taken: set[str] = set()  # the services start together, so no port is bound between picks
        try:
            for name, cmd in services.items():
                if name in ONE_SHOT:
                    continue
                if name == "llm-server":
                    # The embedded LLM server, on a free port instead of compose's 8080.
                    llm_port = str(free_port())
                    procs[name] = _start(_local(cmd, {"--port": llm_port}), env)
                    base = f"http://127.0.0.1:{llm_port}/v1"
                    for _ in range(1500):
                        if http_ok(f"{base}/models"):
                            break
                        server = procs[name]
                        assert server.poll() is None, server.stdout.read() if server.stdout else ""
                        time.sleep(0.2)
                    else:
                        pytest.fail("the embedded LLM server did not answer")
                    env["OPENAI_BASE_URL"] = base
                    continue
                # Compose's fixed host ports moved to free ones: a `spielbus run` on this machine
                # (default live page 8400, metrics 9400) must not fail the test.
                flags = ("--metrics-port", "--web-port")
                ports: dict[str, str] = {f: _unused_port(taken) for f in flags if f in cmd}
                cmd = _local(cmd, {**paths, **ports, "--out": str(analysis), "--analysis": str(analysis)})
                local_cmds[name] = cmd
                procs[name] = _start(cmd, env)
            # Started together and then awaited: one at a time, six Python starts on a loaded
            # machine outlasted the test's timeout.
            for name, cmd in local_cmds.items():
                ready = {
                    "referee": r"referee worker on",
                    "ladder": r"ladder \S+ on ",
                    "analyst": r"analyst on \S+: scoring into",
                }.get(name, rf"agent {name} \(.*\) ready")
                _wait_line(procs[name], ready)
                if "--metrics-port" in cmd:
                    port = cmd[cmd.index("--metrics-port") + 1]
                    assert "spielbus_" in _scrape(f"http://127.0.0.1:{port}/metrics")
            web = _arg(local_cmds["referee"], "--web-port")
            assert "Spielbus live" in _scrape(f"http://127.0.0.1:{web}/")
            tour = _start(_local(services["tournament"], paths), env)
            procs["tournament"] = tour
            # Submitted: the referee starts matches of the default tournament.
            for _ in range(600):
                matches = json.loads(_scrape(f"http://127.0.0.1:{web}/api/matches"))["matches"]
                if any(m["moves"] > 0 for m in matches):
                    break
                assert tour.poll() is None, tour.stdout.read() if tour.stdout else ""
                time.sleep(0.2)
            else:
                pytest.fail("no match of the submitted tournament made a move")
            assert {tuple(m["seats"]) for m in matches} and all(
                m["tournament"].startswith("compose-") for m in matches
            )
            # The analyst, logged in as the referee, scores the tournament's matches as they end.
            scored = analysis / "analysis.jsonl"
            for _ in range(1500):
                if scored.exists() and scored.read_text().strip():
                    break
                assert procs["analyst"].poll() is None, (
                    procs["analyst"].stdout.read() if procs["analyst"].stdout else ""
                )
                time.sleep(0.2)
            else:
                pytest.fail("the analyst scored no match of the submitted tournament")
            row = json.loads(scored.read_text().splitlines()[0])
            assert row["agent"] in {"random", "mcts", "llm"} and row["game"] in {"tic_tac_toe", "kuhn_poker"}
        finally:
            for p in procs.values():
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            codes: dict[str, int | str] = {}
            for name, p in procs.items():
                try:
                    codes[name] = p.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    p.kill()
                    codes[name] = "killed"
        long_running = {k: v for k, v in codes.items() if k != "tournament"}
        assert set(long_running.values()) == {0}, f"services did not drain and exit cleanly: {codes}"
    # The narrow rights were enough: no refused login, publish or subscription (live page included).
    violations = [line for line in log.read_text().splitlines() if "violation" in line.lower()]
    assert violations == [], "\n".join(violations[:20])


def _auth_init(cmd: list[str], env: dict[str, str], auth: Path) -> None:
    """The one-shot `auth-init` service: writes the folder, and a second run (every later
    `docker compose up`) succeeds and keeps the passwords that the running services use."""
    exe = str(Path(sys.executable).parent / "spielbus")

    def once() -> bytes:
        out = subprocess.run([exe, *cmd[1:]], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stdout + out.stderr
        return (auth / "auth.json").read_bytes()

    assert once() == once()
    assert {u.agent for u in load_auth(auth).users if u.role == "agent"} == {"random", "mcts", "llm"}


@pytest.mark.slow
def test_real_prometheus_scrapes_a_run(tmp_path: Path) -> None:
    """The real Prometheus binary against the embedded stack during a tournament: it finds
    spielbus_ series of the referee and of the agents through its HTTP API."""
    prometheus = _tool("prometheus", "prometheus")
    metrics_port, prom_port = free_port(), free_port()
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        'name = "promcheck"\ngames_per_pairing = 3\nconcurrency = 2\nseed = 1\n'
        '[[games]]\nname = "tic_tac_toe"\n[[games]]\nname = "kuhn_poker"\n'
        '[agents.rand]\nkind = "random"\n[agents.mc]\nkind = "mcts"\n'
        "options = { simulations = 20, rollouts = 1 }\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "spielbus.cli",
            "run",
            str(cfg),
            "--run-dir",
            str(tmp_path / "runs"),
            "--metrics-port",
            str(metrics_port),
            "--web-port",
            "off",
            "--quiet",
            "--keep-serving",
        ],
        cwd=ROOT,
        env={**env, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    prom_cfg = tmp_path / "prometheus.yml"
    prom_cfg.write_text(
        yaml.safe_dump(
            {
                "global": {"scrape_interval": "1s"},
                "scrape_configs": [
                    {"job_name": "spielbus", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}
                ],
            }
        )
    )
    prom = None
    try:
        _wait_line(run, rf"Prometheus metrics: http://\S+:{metrics_port}/")
        prom = subprocess.Popen(
            [
                prometheus,
                f"--config.file={prom_cfg}",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
            ],
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("w"),
        )
        _wait_line(run, r"Still serving")  # the tournament is over; its final numbers stay up
        api = f"http://127.0.0.1:{prom_port}/api/v1/query?query="
        wanted = {
            "spielbus_moves_total": "agent",
            "spielbus_matches_total": "outcome",
            "spielbus_agent_turns_total": "agent",
            "spielbus_rating_bt": "agent",
        }
        found: dict[str, list[dict]] = {}
        for _ in range(300):
            for name in wanted:
                if name in found:
                    continue
                try:
                    body = json.loads(_scrape(api + urllib.parse.quote(f"sum by ({wanted[name]}) ({name})")))
                except OSError:
                    break  # Prometheus still starting
                result = body["data"]["result"]
                # Counters only grow: wait for the final tally of the finished tournament.
                if result and (name != "spielbus_matches_total" or _total(result) == 12):
                    found[name] = result
            if len(found) == len(wanted):
                break
            assert prom.poll() is None, (tmp_path / "prometheus.log").read_text()[-2000:]
            time.sleep(0.2)
        assert set(found) == set(wanted), f"series missing in Prometheus: {set(wanted) - set(found)}"
        assert {r["metric"]["agent"] for r in found["spielbus_moves_total"]} == {"rand", "mc"}
        assert _total(found["spielbus_matches_total"]) == 12
        print(json.dumps(found, indent=1))
    finally:
        if prom is not None:
            prom.terminate()
            prom.wait(timeout=30)
        run.send_signal(signal.SIGINT)
        try:
            run.wait(timeout=60)
        except subprocess.TimeoutExpired:
            run.kill()
