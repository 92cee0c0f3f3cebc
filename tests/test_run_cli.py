"""`spielbus run` fails with a message, not a traceback, stops cleanly on SIGTERM, and leaves no
empty run folder behind (issue 10.8, the run.py parts). Real processes, real nats-server."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.test_cli import ROOT, SMALL, SPIELBUS, _children, _run

QUIET_PORTS = ["--web-port", "off", "--metrics-port", "off"]


def _cfg(tmp_path: Path, **replace: str) -> Path:
    text = SMALL.format(name="small", ext="")
    for old, new in replace.items():
        text = text.replace(old, new)
    cfg = tmp_path / "small.toml"
    cfg.write_text(text)
    return cfg


def test_run_with_no_workers_is_a_usage_error(tmp_path: Path) -> None:
    out = _run(["run", str(_cfg(tmp_path)), "--workers", "0", "--run-dir", str(tmp_path / "runs")])
    assert out.returncode == 2, out.stdout + out.stderr
    assert "--workers" in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "runs").exists()


def test_an_unwritable_run_dir_is_a_message(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the run folder should go")
    out = _run(["run", str(_cfg(tmp_path)), "--run-dir", str(blocker)])
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot create the run folder" in out.stdout
    assert "Traceback" not in out.stdout + out.stderr


def test_a_failed_start_leaves_no_run_folder(tmp_path: Path) -> None:
    # Nothing listens on port 1: the run cannot start.
    out = _run(
        ["run", str(_cfg(tmp_path)), "--nats", "nats://127.0.0.1:1", "--run-dir", str(tmp_path / "runs")]
    )
    assert out.returncode == 1, out.stdout + out.stderr
    assert "cannot connect" in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert not any((tmp_path / "runs").iterdir()) if (tmp_path / "runs").exists() else True


def _store_dir(pid: int) -> str | None:
    """The JetStream store folder of the embedded nats-server among `pid`'s children."""
    for child in _children(pid):
        try:
            argv = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"-sd" in argv:
            return argv[argv.index(b"-sd") + 1].decode()
    return None


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_sigterm_stops_a_run_like_ctrl_c_and_an_empty_nats_url_means_embedded(tmp_path: Path) -> None:
    cfg = _cfg(tmp_path, **{"games_per_pairing = 1": "games_per_pairing = 5000"})
    env = {**os.environ, "NATS_URL": ""}  # empty: start the embedded server, do not dial 4222
    run = subprocess.Popen(
        [*SPIELBUS, "run", str(cfg), "--run-dir", str(tmp_path / "runs"), "--quiet", *QUIET_PORTS],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        runs = tmp_path / "runs"
        while not any(p.stat().st_size > 0 for p in runs.glob("*/matches.jsonl")):
            assert run.poll() is None, run.stdout.read() if run.stdout else ""
            time.sleep(0.05)
        store = _store_dir(run.pid)
        assert store and Path(store).exists()
        run.send_signal(signal.SIGTERM)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 143, out
    assert "Embedded nats-server" in out and "SIGTERM" in out and "Traceback" not in out
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["interrupted"] == "SIGTERM" and summary["matches"] >= 1
    # The exact command that continues the run, as Ctrl-C prints it (issue 26).
    assert shlex.join(["spielbus", "run", str(cfg), "--resume", str(folder)]) in out, out
    lines = (folder / "matches.jsonl").read_text().splitlines()
    assert len(lines) >= summary["matches"]
    assert not Path(store).exists(), "the embedded server's temporary store was left behind"


@pytest.mark.slow
async def test_a_referee_stops_promptly_on_sigterm_even_with_nats_down() -> None:
    """A match stuck on a slow agent (two-minute deadline) and NATS gone: SIGTERM still ends the
    referee within its drain grace, cleanly and without a traceback."""
    import asyncio

    from bus.connect import connect
    from bus.streams import ensure_streams
    from bus.subjects import Subjects
    from tests.helpers import uid
    from tests.reliability_helpers import RestartableNats, bot, make_specs

    srv = RestartableNats().start()
    proc = subprocess.Popen(
        [*SPIELBUS, "referee", "--nats", srv.url, "--drain-grace", "1"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), 60)
        assert "referee worker on" in line, line
        nc = await connect(srv.url, name="sigterm-test")
        subjects = Subjects()
        await ensure_streams(nc.jetstream(), subjects)
        asked = asyncio.Event()

        async def never(turn):
            asked.set()
            return None

        slow, other = uid("slow"), uid("other")
        (match,) = make_specs(uid("stuck"), "tic_tac_toe", [[slow, other]], deadline_ms=120_000)
        async with bot(nc, subjects, slow, never):
            await nc.jetstream().publish(subjects.schedule, match.model_dump_json().encode())
            await asyncio.wait_for(asked.wait(), 60)
            srv.kill()
            proc.send_signal(signal.SIGTERM)
            code = await asyncio.to_thread(proc.wait, 60)
        await nc.close()
    finally:
        if proc.poll() is None:
            proc.kill()
        srv.close()
    err = proc.stderr.read() if proc.stderr else ""
    assert code == 0, err
    assert "Traceback" not in err


def test_wait_flags_take_finite_non_negative_seconds(tmp_path: Path) -> None:
    for flag, value in (("--deadline", "-1"), ("--idle-timeout", "nan"), ("--absent-limit", "inf")):
        out = _run(["run", str(_cfg(tmp_path)), flag, value, "--run-dir", str(tmp_path / "runs")])
        assert out.returncode == 2 and flag in out.stderr, out.stderr
    out = _run(["referee", "--drain-grace", "-5"])
    assert out.returncode == 2 and "--drain-grace" in out.stderr


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_ctrl_c_while_the_agents_are_checked_is_a_line_not_a_traceback(tmp_path: Path) -> None:
    """Ctrl-C before the run folder exists (the agents' options are being checked, which takes a
    minute on a loaded machine) says there is nothing to resume; it used to print a traceback."""
    run = subprocess.Popen(
        [*SPIELBUS, "run", str(_cfg(tmp_path)), "--run-dir", str(tmp_path / "runs"), "--quiet", *QUIET_PORTS],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # As at a terminal: a background shell may have left SIGINT ignored for its children.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        deadline = time.monotonic() + 120
        while not any(b"--check" in _cmdline(c) for c in _children(run.pid)):
            assert run.poll() is None and time.monotonic() < deadline, run.stdout.read() if run.stdout else ""
            time.sleep(0.02)
        run.send_signal(signal.SIGINT)
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 130, out
    assert "nothing to resume" in out and "Traceback" not in out, out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux /proc")
def test_ctrl_c_at_a_terminal_drains_the_run_before_its_bus_and_agents_stop(tmp_path: Path) -> None:
    """A terminal's Ctrl-C signals the whole foreground process group. The embedded nats-server and
    the agents were in it, so they quit at once while the referee was still draining: in-flight
    matches were aborted on a lost connection and a finished match's ack failed with a traceback.
    The run's children now have their own session: only `spielbus run` gets the signal, and it stops
    them after the drain."""
    cfg = _cfg(
        tmp_path,
        **{"games_per_pairing = 1": "games_per_pairing = 5000", "concurrency = 2": "concurrency = 4"},
    )
    run = subprocess.Popen(
        [*SPIELBUS, "run", str(cfg), "--run-dir", str(tmp_path / "runs"), "--quiet", *QUIET_PORTS],
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if k != "NATS_URL"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as a shell gives a foreground job
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        runs = tmp_path / "runs"
        while not any(p.stat().st_size > 2000 for p in runs.glob("*/matches.jsonl")):
            assert run.poll() is None, run.stdout.read() if run.stdout else ""
            time.sleep(0.05)
        os.killpg(run.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        out, _ = run.communicate(timeout=120)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130, out
    assert "Traceback" not in out, out
    assert "disconnected from" not in out and "aborted" not in out, out
    (folder,) = [p for p in runs.iterdir() if p.is_dir()]
    assert shlex.join(["spielbus", "run", str(cfg), "--resume", str(folder)]) in out, out
    records = [json.loads(line) for line in (folder / "matches.jsonl").read_text().splitlines()]
    assert records and not [r["match_id"] for r in records if r.get("faults")]


@pytest.mark.slow
def test_a_run_decided_by_a_built_in_agents_timeouts_says_so_and_fails(tmp_path: Path) -> None:
    """Issue 40: the `wordnt` example forfeited on its clock on a busy machine and the run exited 0.
    Here a built-in MCTS sized far past its deadline loses every match on time: the run names it,
    records it in summary.json, and exits 1."""
    cfg = _cfg(
        tmp_path,
        **{
            "deadline_ms = 5000": "deadline_ms = 100",
            "simulations = 30, rollouts = 1": "simulations = 200000, rollouts = 1",
        },
    )
    out = _run(["run", str(cfg), "--run-dir", str(tmp_path / "runs"), "--quiet", *QUIET_PORTS])
    assert out.returncode == 1, out.stdout + out.stderr
    assert "decided by timeouts of built-in agents: m1" in " ".join(out.stdout.split()), out.stdout
    (folder,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["decided_by_builtin_timeouts"]["m1"] >= 1


@pytest.mark.slow
def test_piped_output_keeps_whole_tables_and_shows_progress_lines(tmp_path: Path) -> None:
    """Issue 40: piped or logged, `spielbus run` cut its tables to 80 columns and showed no progress
    at all. Captured here (not a terminal, no COLUMNS): each header row is one whole line, and a
    plain progress line is printed as records arrive, the last at the full count."""
    cfg = _cfg(tmp_path, **{"games_per_pairing = 1": "games_per_pairing = 3"})
    env = {k: v for k, v in os.environ.items() if k not in ("NATS_URL", "COLUMNS", "LINES")}
    out = subprocess.run(
        [*SPIELBUS, "run", str(cfg), "--run-dir", str(tmp_path / "runs"), *QUIET_PORTS],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    header = [ln for ln in lines if "faults/100 moves" in ln]
    assert header and all(w in header[0] for w in ("agent", "mean return", "fallbacks", "tokens/move")), (
        out.stdout
    )
    progress = [ln for ln in lines if ln.startswith("progress: ")]
    assert progress and progress[-1].startswith("progress: 6/6 matches recorded"), out.stdout
