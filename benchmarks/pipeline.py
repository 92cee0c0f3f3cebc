"""The deployed shape, measured: every part its own process, tic-tac-toe between instant agents.

Processes: the nats-server (JetStream on, as `spielbus run` starts it), `spielbus referee`
(`--concurrency K`), two `spielbus agent first` services, and this script as the submitter (it
publishes match specs to `SPIELBUS_SCHEDULE`, as `spielbus submit` does, and counts the moves
on the live `moved` events). The baseline, in the same run: raw nats-py request/reply between
two processes (this one asking, a child echoing a 600-byte payload) with the same number in
flight, K. Phases run raw, pipeline, raw; the ratio uses the mean of the two raw phases.

With accounts (issue 24), in the same run: a second server with the accounts of `spielbus auth
init` (referee, the two agents, each in its own account, turns crossing by service import),
its own referee and agents logged in with `--auth`. Its pipeline phase runs between two more
phases of the open stack, and `accounts / open` is their throughput ratio (aim: at least 0.9).

CPU µs per move of every process are read from `/proc/<pid>/stat` (utime + stime, in clock
ticks: 10 ms resolution, so use phases of several seconds) across the measured window.

    .venv/bin/python benchmarks/pipeline.py [--seconds 5] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from bus.auth import config_path, write_auth
from bus.connect import Login, connect
from bus.process import stop_process
from bus.protocol import MatchSpec
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects
from games.loader import parse_spec

TICK = os.sysconf("SC_CLK_TCK")
ECHO = "bench.pipeline.echo"
PAYLOAD = b"x" * 600
ECHO_CHILD = f"""
import asyncio, nats
from bus.connect import flush
async def main():
    nc = await nats.connect({{url!r}})
    async def echo(msg):
        await msg.respond(msg.data)
    await nc.subscribe({ECHO!r}, cb=echo)
    await flush(nc)
    print("ready", flush=True)
    await asyncio.Event().wait()
asyncio.run(main())
"""


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_all(pids: dict[str, int]) -> dict[str, float]:
    return {name: cpu_s(pid) for name, pid in pids.items()}


def spawn(args: list[str], url: str, ready: str, log_dir: Path) -> subprocess.Popen[bytes]:
    """Start a process with its output in a file (never a pipe nobody reads); wait for `ready`."""
    env = {**os.environ, "NATS_URL": url}
    log = log_dir / f"{len(list(log_dir.iterdir()))}.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if ready in log.read_text(errors="replace"):
            return proc
        if proc.poll() is not None:
            raise RuntimeError(f"{args[2:5]} exited: {log.read_text(errors='replace')[-2000:]}")
        time.sleep(0.1)
    stop_process(proc)
    raise RuntimeError(f"{args[2:5]} was not ready within 60 s")


async def raw_phase(
    url: str, in_flight: int, seconds: float, pids: dict[str, int]
) -> tuple[float, dict[str, float]]:
    nc = await connect(url, name="bench-raw")
    n = 0
    before = cpu_all(pids)
    t0 = time.perf_counter()

    async def one() -> None:
        nonlocal n
        while time.perf_counter() - t0 < seconds:
            await nc.request(ECHO, PAYLOAD, timeout=5)
            n += 1

    await asyncio.gather(*(one() for _ in range(in_flight)))
    dt = time.perf_counter() - t0
    after = cpu_all(pids)
    await nc.drain()
    return n / dt, {k: (after[k] - before[k]) / max(n, 1) * 1e6 for k in pids}


async def pipeline_phase(
    url: str, in_flight: int, seconds: float, pids: dict[str, int], login: Login | None = None
) -> tuple[float, dict[str, float]]:
    subjects = Subjects()
    nc = await connect(url, name="bench-submitter", **(login or {}))
    js = nc.jetstream()
    await ensure_streams(js, subjects)
    moves = 0

    async def count(msg) -> None:  # type: ignore[no-untyped-def]  # nats-py's Msg callback
        nonlocal moves
        moves += 1

    await nc.subscribe(subjects.match_all("moved"), cb=count)
    game = parse_spec("tic_tac_toe")
    run = uuid.uuid4().hex[:8]
    submitted = 0

    async def submit(k: int) -> None:
        nonlocal submitted
        for _ in range(k):
            submitted += 1
            spec = MatchSpec(
                match_id=f"pipe-{run}-{submitted}", tournament=f"pipe-{run}", game=game,
                seats=["pipe-a", "pipe-b"] if submitted % 2 else ["pipe-b", "pipe-a"], seed=submitted,
            )  # fmt: skip
            await js.publish(subjects.schedule, spec.model_dump_json().encode())

    await submit(4 * in_flight)  # warm: the referee fills its slots
    await asyncio.sleep(1.0)
    before, m0, t0 = cpu_all(pids), moves, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        info = await js.stream_info(subjects.schedule_stream)
        if (info.state.messages or 0) < 4 * in_flight:  # keep the queue from running dry
            await submit(4 * in_flight)
        await asyncio.sleep(0.05)
    dt, m1, after = time.perf_counter() - t0, moves, cpu_all(pids)
    n = m1 - m0
    if login is None:
        await js.purge_stream(subjects.schedule_stream)
    else:  # the referee user may not purge (bus/auth.py): the queued matches are played out
        for _ in range(600):
            if not (await js.stream_info(subjects.schedule_stream)).state.messages:
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # matches in flight finish
    await nc.drain()
    return n / dt, {k: (after[k] - before[k]) / max(n, 1) * 1e6 for k in pids}


def show(label: str, rate: float, cpu: dict[str, float], unit: str) -> None:
    parts = ", ".join(f"{k} {v:.0f}" for k, v in cpu.items())
    print(f"{label:<10} {rate:8.0f} {unit}/s   CPU µs per {unit}: total {sum(cpu.values()):.0f} ({parts})")


def start_stack(
    srv: EmbeddedNats,
    concurrency: int,
    logs: Path,
    procs: dict[str, subprocess.Popen[bytes]],
    tag: str = "",
    auth: list[str] | None = None,
) -> dict[str, int]:
    """A referee and the two agents on `srv` (with `auth`: `--auth DIR`), into `procs`; their pids."""
    spielbus = [sys.executable, "-m", "spielbus.cli"]
    login = auth or []
    referee = [*spielbus, "referee", "--concurrency", str(concurrency), "--absent-limit", "0", *login]
    agent = [*spielbus, "agent", "first", "--max-concurrency", "64", *login, "--name"]
    procs[f"referee{tag}"] = spawn(referee, srv.url, "referee worker on", logs)
    procs[f"agent-a{tag}"] = spawn([*agent, "pipe-a"], srv.url, "ready", logs)
    procs[f"agent-b{tag}"] = spawn([*agent, "pipe-b"], srv.url, "ready", logs)
    assert srv._proc is not None  # the server's process, for its CPU
    return {
        "nats-server": srv._proc.pid,
        **{k.removesuffix(tag): procs[k].pid for k in (f"referee{tag}", f"agent-a{tag}", f"agent-b{tag}")},
        "submitter": os.getpid(),
    }


async def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=5.0, help="length of each phase")
    p.add_argument("--concurrency", type=int, default=8, help="matches (and raw requests) in flight")
    args = p.parse_args()
    logs = Path(tempfile.mkdtemp(prefix="spielbus-pipeline-"))
    auth = logs / "auth"
    bundle = write_auth(["pipe-a", "pipe-b"], auth)
    ref = bundle.referee()
    with EmbeddedNats() as srv, EmbeddedNats(config=config_path(auth)) as secured:
        assert srv._proc is not None  # the server's process, for its CPU
        # Filled one by one inside the try: a child that fails to start stops the ones before it.
        procs: dict[str, subprocess.Popen[bytes]] = {}
        try:
            pipe_pids = start_stack(srv, args.concurrency, logs, procs)
            acc_pids = start_stack(secured, args.concurrency, logs, procs, "-acc", ["--auth", str(auth)])
            echo = [sys.executable, "-c", ECHO_CHILD.format(url=srv.url)]
            procs["echo"] = spawn(echo, srv.url, "ready", logs)
            raw_pids = {"nats-server": srv._proc.pid, "echo": procs["echo"].pid, "submitter": os.getpid()}
            login: Login = {"user": ref.user, "password": ref.password}
            raw1, raw1_cpu = await raw_phase(srv.url, args.concurrency, args.seconds, raw_pids)
            pipe, pipe_cpu = await pipeline_phase(srv.url, args.concurrency, args.seconds, pipe_pids)
            acc, acc_cpu = await pipeline_phase(secured.url, args.concurrency, args.seconds, acc_pids, login)
            pipe2, pipe2_cpu = await pipeline_phase(srv.url, args.concurrency, args.seconds, pipe_pids)
            raw2, raw2_cpu = await raw_phase(srv.url, args.concurrency, args.seconds, raw_pids)
        finally:
            for proc in procs.values():
                stop_process(proc, grace_s=15)
    raw = (raw1 + raw2) / 2
    print(f"tic_tac_toe, {args.concurrency} in flight, {args.seconds:.0f} s phases")
    show("raw", raw1, raw1_cpu, "round trip")
    show("pipeline", pipe, pipe_cpu, "move")
    show("accounts", acc, acc_cpu, "move")
    show("pipeline", pipe2, pipe2_cpu, "move")
    show("raw again", raw2, raw2_cpu, "round trip")
    total = sum(pipe_cpu.values())
    print(f"pipeline / raw: {pipe / raw:.2f}; CPU per move, all processes: {total:.0f} µs (aim: at most 250)")
    print(f"accounts / open: {acc / ((pipe + pipe2) / 2):.2f} (aim: at least 0.90)")


if __name__ == "__main__":
    asyncio.run(main())
