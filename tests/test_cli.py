"""The `spielbus` command as a user runs it: real processes, a real nats-server."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from bus.server import EmbeddedNats

SPIELBUS = [sys.executable, "-m", "spielbus.cli"]
ROOT = Path(__file__).resolve().parents[1]

SMALL = """
name = "{name}"
games_per_pairing = 1
concurrency = 2
deadline_ms = 5000
seed = 3
[[games]]
name = "tic_tac_toe"
[agents.r1]
kind = "random"
{ext}
[agents.m1]
kind = "mcts"
options = {{ simulations = 30, rollouts = 1 }}
{ext}
"""


def _run(args: list[str], timeout: float = 240, **kw: Any) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    return subprocess.run(
        [*SPIELBUS, *args], capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=env, **kw
    )


def _records(run_dir: Path) -> list[dict]:
    (folder,) = [p for p in run_dir.iterdir() if p.is_dir()]
    return [json.loads(line) for line in (folder / "matches.jsonl").read_text().splitlines()]


def test_protocol_schema_lists_every_message() -> None:
    # One JSON Schema bundle (issue 23): the messages are under `$defs`, by model name.
    out = _run(["protocol", "schema"])
    assert out.returncode == 0, out.stderr
    defs = json.loads(out.stdout)["$defs"]
    models = {"Turn", "Move", "MatchStarted", "MatchEnded", "MatchEvent", "MatchSpec", "MatchRecord"}
    assert models <= set(defs)
    assert "legal_actions" in defs["Turn"]["properties"]
    turn = json.loads(_run(["protocol", "schema", "--message", "turn"]).stdout)
    assert "legal_actions" in turn["properties"] and turn["$schema"].endswith("2020-12/schema")
    assert _run(["protocol", "schema", "--message", "nope"]).returncode == 2
    asyncapi = json.loads(_run(["protocol", "asyncapi"]).stdout)
    assert asyncapi["asyncapi"] == "3.0.0"
    assert asyncapi["channels"]["turn"]["address"] == "spielbus.turn.{agent}"


def test_games_lists_openspiel_and_our_games() -> None:
    out = _run(["games"])
    assert out.returncode == 0
    names = out.stdout.split()
    assert {"tic_tac_toe", "leduc_poker", "goofspiel", "backgammon"} <= set(names)
    assert {"mnk", "army5x5a", "quadranto", "hand_of_war"} <= set(names)  # the Code World Models games


def test_bad_tournament_file_exits_2_and_starts_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        SMALL.format(name="bad", ext="").replace("games_per_pairing = 1", "games_per_pairing = -1")
    )
    out = _run(["run", str(bad), "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 2
    assert "games_per_pairing" in out.stdout and "bad.toml:3" in out.stdout
    assert not (tmp_path / "runs").exists()
    missing = _run(["run", str(tmp_path / "nope.toml")])
    assert missing.returncode == 2 and "cannot read" in missing.stdout


@pytest.mark.slow
def test_run_embedded_tournament(tmp_path: Path) -> None:
    cfg = tmp_path / "small.toml"
    cfg.write_text(SMALL.format(name="small", ext=""))
    out = _run(["run", str(cfg), "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Standings" in out.stdout and "Ratings" in out.stdout and "Faults by reason" in out.stdout
    recs = _records(tmp_path / "runs")
    assert len(recs) == 2
    assert all(r["outcome"] in ("decisive", "draw") for r in recs)
    assert {p["kind"] for r in recs for p in r["provenance"]} == {"random", "mcts"}
    folder = next((tmp_path / "runs").iterdir())
    assert {s["agent"] for s in json.loads((folder / "standings.json").read_text())} == {"r1", "m1"}
    rates = json.loads((folder / "ratings.json").read_text())
    assert all(r["bt_low"] <= r["bt"] <= r["bt_high"] for r in rates)


@pytest.mark.slow
def test_separate_processes_referee_agents_submit(tmp_path: Path) -> None:
    """What docker compose runs: a referee, two agents and a submitted tournament, as separate processes."""
    with EmbeddedNats() as srv:
        env = {**os.environ, "NATS_URL": srv.url}
        procs = [
            subprocess.Popen([*SPIELBUS, "referee", "--concurrency", "2"], env=env, cwd=ROOT),
            subprocess.Popen([*SPIELBUS, "agent", "random", "--name", "r1"], env=env, cwd=ROOT),
            subprocess.Popen(
                [*SPIELBUS, "agent", "mcts", "--name", "m1", "--simulations", "30"], env=env, cwd=ROOT
            ),
        ]
        try:
            cfg = tmp_path / "ext.toml"
            cfg.write_text(SMALL.format(name="ext", ext="external = true"))
            out = subprocess.run(
                [*SPIELBUS, "submit", str(cfg), "--run-dir", str(tmp_path / "runs")],
                capture_output=True,
                text=True,
                timeout=240,
                cwd=ROOT,
                env=env,
            )
            assert out.returncode == 0, out.stdout + out.stderr
            assert "Standings" in out.stdout
            recs = _records(tmp_path / "runs")
            assert len(recs) == 2 and all(r["faults"] == [] for r in recs)
        finally:
            for p in procs:
                p.send_signal(signal.SIGTERM)
            for p in procs:
                assert p.wait(timeout=30) == 0, "a service did not drain and exit cleanly on SIGTERM"


@pytest.mark.slow
async def test_killed_agent_process_replica_takes_over(nats_url: str) -> None:
    """Two replicas of one agent as real processes; one is SIGKILLed mid-tournament; play goes on."""
    from bus.connect import connect
    from bus.protocol import FaultPolicy, MatchEvent
    from referee.match import MatchRunner
    from tests.helpers import spec, uid

    name, other = uid("rep"), uid("opp")
    env = {**os.environ, "NATS_URL": nats_url}
    cmd = [sys.executable, "-m", "agents"]
    procs = [
        subprocess.Popen([*cmd, kind, "--name", n], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
        for kind, n in (("random", name), ("random", name), ("first", other))
    ]
    nc = await connect(nats_url, name="kill-test")
    try:
        # Every process, both replicas included, must be serving before the first match.
        for p in procs:
            assert p.stdout is not None
            line = await asyncio.wait_for(asyncio.to_thread(p.stdout.readline), 120)
            assert "ready" in line, line
        policy = FaultPolicy(kind="retry", retries=2)
        killed = False

        async def kill_after_first_move(event: MatchEvent) -> None:
            nonlocal killed
            if event.type == "moved" and not killed:
                killed = True
                procs[0].send_signal(signal.SIGKILL)
                procs[0].wait()

        recs = []
        for s in range(4):
            match = spec("tic_tac_toe", [name, other], policy=policy, deadline_ms=2000, seed=s)
            recs.append(await MatchRunner(nc, match, publish_event=kill_after_first_move).run())
        assert killed
        assert all(r.outcome in ("decisive", "draw") for r in recs), [r.faults for r in recs]
        assert all(f.reason == "timeout" for r in recs for f in r.faults)
        # Every match, the ones after the kill included, has moves by the replicated agent.
        assert all(any(m.agent == name for m in r.moves) for r in recs)
    finally:
        await nc.drain()
        for p in procs:
            if p.poll() is None:
                p.terminate()
                p.wait(timeout=30)


@pytest.mark.slow
def test_run_starts_the_embedded_llm_for_an_llm_agent(tmp_path: Path) -> None:
    cfg = tmp_path / "llm.toml"
    cfg.write_text(
        'name = "llm"\ngames_per_pairing = 1\ndeadline_ms = 60000\nboth_seat_orders = false\n'
        '[[games]]\nname = "tic_tac_toe"\n'
        '[agents.policy]\nkind = "llm_policy"\n[agents.rand]\nkind = "random"\n'
    )
    env_free = {k: v for k, v in os.environ.items() if k not in ("OPENAI_BASE_URL", "NATS_URL")}
    out = subprocess.run(
        [*SPIELBUS, "run", str(cfg), "--run-dir", str(tmp_path / "runs"), "--quiet"],
        capture_output=True,
        text=True,
        timeout=400,
        cwd=ROOT,
        env=env_free,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Embedded LLM server" in out.stdout
    (rec,) = _records(tmp_path / "runs")
    llm_moves = [m for m in rec["moves"] if m["agent"] == "policy"]
    assert llm_moves and all(m["usage"]["llm_calls"] + m["usage"]["cache_hits"] >= 1 for m in llm_moves)
    assert any("smollm2" in model for p in rec["provenance"] for model in p["models"])


def test_bad_agent_options_are_a_bad_file(tmp_path: Path) -> None:
    bad = tmp_path / "opts.toml"
    text = SMALL.format(name="opts", ext="").replace("simulations = 30", "simulations = 0, bogus = 1")
    bad.write_text(text.replace('kind = "random"', 'kind = "no_such_kind"'))
    out = _run(["run", str(bad), "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 2
    flat = " ".join(out.stdout.split())
    assert "agents.m1" in flat and "simulations" in flat and "bogus" in flat
    assert "agents.r1" in flat and "no_such_kind" in flat
    assert not (tmp_path / "runs").exists()


def test_an_agent_that_cannot_play_a_game_of_the_file_is_a_bad_file(tmp_path: Path) -> None:
    """Every agent plays every game of a tournament: a kind that plays only others (the ghost
    solver, stockfish) would forfeit every match of them, and the run would rate the forfeits."""
    bad = tmp_path / "kinds.toml"
    bad.write_text(SMALL.format(name="kinds", ext="").replace('kind = "random"', 'kind = "ghost_solver"'))
    out = _run(["run", str(bad), "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 2, out.stdout + out.stderr
    flat = " ".join(out.stdout.split())
    assert "agents.r1" in flat and "plays only ghost, not tic_tac_toe" in flat
    assert "agents.m1" not in flat  # mcts plays any game
    assert not (tmp_path / "runs").exists()


def _children(pid: int) -> set[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return set()
    return {int(x) for x in text.split()}


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_a_killed_run_leaves_no_children(tmp_path: Path) -> None:
    """SIGKILL gives `spielbus run` no chance to clean up: its agents and nats-server go anyway."""
    cfg = tmp_path / "long.toml"
    cfg.write_text(
        SMALL.format(name="long", ext="").replace("games_per_pairing = 1", "games_per_pairing = 5000")
    )
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    run = subprocess.Popen(
        [
            *SPIELBUS,
            "run",
            str(cfg),
            "--run-dir",
            str(tmp_path / "runs"),
            "--quiet",
            "--web-port",
            "off",
            "--metrics-port",
            "off",
        ],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert run.stdout is not None
    for line in run.stdout:  # the server and both agents are up once play has begun
        if "Embedded nats-server" in line:
            break
    records = tmp_path / "runs"
    while not any(p.stat().st_size > 0 for p in records.glob("*/matches.jsonl")):
        assert run.poll() is None, "the run ended early"
        time.sleep(0.05)
    children = _children(run.pid)
    assert len(children) >= 3  # nats-server and two agents
    run.kill()
    run.wait()
    while any(_alive(c) for c in children):
        time.sleep(0.05)  # pytest's timeout fails the test if they never go


def test_games_json_gives_type_details() -> None:
    out = _run(["games", "--json", "poker"])
    assert out.returncode == 0, out.stderr
    games = {g["name"]: g for g in json.loads(out.stdout)}
    assert games["leduc_poker"]["information"] == "IMPERFECT_INFORMATION"
    assert games["kuhn_poker"]["players"][0] == 2
