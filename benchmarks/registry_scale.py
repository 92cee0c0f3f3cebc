"""How fast bots register, how many one nats-server in operator mode holds, and what a ladder of them
plays (bus/registry.py, referee/ladder/).

Registers `--bots` bots one after another through the registrar (in this process, the real code
path minus HTTP), each then connecting with its login and serving its discovery subject, on a
real nats-server from `spielbus auth init --registry`. Reports the time per registration (every
registration re-issues the referee account with all the bots' imports, so it grows with the
count), the referee account JWT's size, the server's resident memory (from /proc) and how many
bots answer the referee's `$SRV.INFO.<name>` at the end.

With `--play SECONDS` every bot then serves turns (a random player, `agents.runtime.AgentService`)
and `spielbus referee --auth REG` and `spielbus ladder FILE --auth REG` run as processes for that
long: matches counted per minute (from the ladder's bucket), turns answered and refused by the
bots, faulted matches, and the resident memory of nats-server, the ladder and the referee.

Run: .venv/bin/python benchmarks/registry_scale.py [--bots 200] [--play 90]
Limits: one machine, loopback, bots in one process (one connection each, one event loop: on a
loaded machine the bots' process, not the ladder, may be what is slow); tic-tac-toe between random
players, so a match is cheap and the numbers are the bus's and the ladder's, not a game's.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from agents.random_agent import RandomStrategy
from agents.runtime import AgentService
from bus import nats_jwt as J
from bus.connect import connect
from bus.registry import Registrar, RegistrationPolicy, _referee_jwt, init_registry, load_registry
from bus.server import EmbeddedNats
from bus.subjects import LADDER_BUCKET
from referee.ladder.store import LadderStore

ROOT = Path(__file__).resolve().parents[1]


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds a live process has used (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _answer(msg: Msg) -> None:
    await msg.respond(b"{}")


async def register_bots(folder: Path, url: str | list[str], bots: int, system: NATS) -> list[float]:
    """Register bot0000.. in `folder` and write each one's creds; the seconds each registration took.
    `url` may be one server per bot (a cluster: bot i connects to url[i % len(url)])."""
    registrar = Registrar(folder, RegistrationPolicy(policy="open", max_bots=bots), system)
    took: list[float] = []
    for i in range(bots):
        name = f"bot{i:04d}"
        seed = J.new_key("user")
        t0 = time.perf_counter()
        answer = await registrar.register(name, J.public_key(seed), J.public_key(J.new_key("user")))
        took.append(time.perf_counter() - t0)
        assert answer.jwt is not None
        (folder / f"{name}.creds").write_text(J.creds_text(answer.jwt, seed))
    return took


async def bots_online(folder: Path, urls: list[str], bots: int) -> list[NATS]:
    """Each registered bot logged in (bot i through urls[i % len(urls)])."""
    return [
        await connect(urls[i % len(urls)], name=f"bot{i:04d}", creds=str(folder / f"bot{i:04d}.creds"))
        for i in range(bots)
    ]


def ladder_file(folder: Path, bots: int, concurrency: int) -> Path:
    path = folder / "ladder.toml"
    path.write_text(
        f'name = "scale"\nconcurrency = {concurrency}\nrate_per_minute = 60000\nprobe_s = 5\n'
        'deadline_ms = 5000\n[[games]]\nname = "tic_tac_toe"\n'
        f'[registration]\npolicy = "open"\nmax_bots = {bots}\n[limits]\nlog_interval_s = 30\n'
    )
    return path


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "spielbus.cli", *argv], stdout=out, stderr=subprocess.STDOUT, env=env
        )


async def counted(nc: NATS) -> tuple[int, int]:
    """(results in the ladder's bucket, of which with a fault)."""
    try:
        results = await (await LadderStore.open(nc.jetstream(), LADDER_BUCKET)).results()
    except Exception:  # the ladder has not made its bucket yet
        return 0, 0
    return len(results), sum(1 for r in results if r.faults)


async def play(
    folder: Path,
    urls: list[str],
    conns: list[NATS],
    ref: NATS,
    seconds: float,
    concurrency: int,
    midway: Callable[[], Awaitable[None]] | None = None,
) -> dict[str, float]:
    """Serve turns on every bot, run a referee and a ladder process; what one window of play did.
    `midway` runs half way through the window (e.g. a server killed); the matches counted before
    and after it are reported apart."""
    services = [
        AgentService(nc, RandomStrategy.from_options({"seed": i}), name=f"bot{i:04d}")
        for i, nc in enumerate(conns)
    ]
    for svc in services:
        await svc.start()
    nats_arg = ",".join(urls)
    cfg = ladder_file(folder, len(conns), concurrency)
    referee = start(
        ["referee", "--auth", str(folder), "--nats", nats_arg, "--concurrency", str(concurrency)],
        folder / "referee.log",
    )
    ladder = start(["ladder", str(cfg), "--auth", str(folder), "--nats", nats_arg], folder / "ladder.log")
    try:
        for _ in range(240):  # the window opens at the first turn served (2 minutes at most)
            if any(s.turns_answered for s in services):
                break
            await asyncio.sleep(0.5)
        n0, f0 = await counted(ref)
        t0, turns0 = time.monotonic(), sum(s.turns_answered for s in services)
        cpu0 = {"ladder": _cpu_s(ladder.pid), "referee": _cpu_s(referee.pid), "bots": time.process_time()}
        peak = {"ladder": 0.0, "referee": 0.0}
        half: tuple[float, int] | None = None
        while time.monotonic() - t0 < seconds:
            await asyncio.sleep(5)
            peak["ladder"] = max(peak["ladder"], _rss_mb(ladder.pid))
            peak["referee"] = max(peak["referee"], _rss_mb(referee.pid))
            if midway is not None and half is None and time.monotonic() - t0 >= seconds / 2:
                half = (time.monotonic(), (await counted(ref))[0])
                await midway()
        cpu = {
            "ladder_cpu": _cpu_s(ladder.pid) - cpu0["ladder"],
            "referee_cpu": _cpu_s(referee.pid) - cpu0["referee"],
            "bots_cpu": time.process_time() - cpu0["bots"],
        }
        n1, f1 = await counted(ref)
        now = time.monotonic()
        minutes = (now - t0) / 60
        split = {}
        if half is not None:
            split = {
                "per_minute_before": (half[1] - n0) / ((half[0] - t0) / 60),
                "per_minute_after": (n1 - half[1]) / ((now - half[0]) / 60),
            }
        return {
            **split,
            **cpu,
            "matches_per_minute": (n1 - n0) / minutes,
            "matches": n1 - n0,
            "faulted": f1 - f0,
            "turns": sum(s.turns_answered for s in services) - turns0,
            "refused": sum(s.turns_refused for s in services),
            "bots_played": sum(1 for s in services if s.turns_answered),
            "ladder_mb": peak["ladder"],
            "referee_mb": peak["referee"],
            "minutes": minutes,
        }
    finally:
        for proc in (ladder, referee):
            proc.terminate()
        for proc in (ladder, referee):
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
        for svc in services:
            await svc.stop()


def report_play(r: dict[str, float]) -> str:
    return (
        f"played {r['minutes']:.1f} min: {r['matches']:.0f} matches counted "
        f"({r['matches_per_minute']:.0f}/min, {r['faulted']:.0f} with a fault), {r['turns']:.0f} turns "
        f"answered, {r['refused']:.0f} refused, {r['bots_played']:.0f} bots played; "
        f"peak RSS ladder {r['ladder_mb']:.0f} MB, referee {r['referee_mb']:.0f} MB; CPU s ladder "
        f"{r['ladder_cpu']:.0f}, referee {r['referee_cpu']:.0f}, bots' process {r['bots_cpu']:.0f}"
    )


async def main(bots: int, seconds: float, concurrency: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="registry-scale-"))
    init_registry(folder)
    with EmbeddedNats(config=folder / "nats-server.conf") as srv:
        assert srv._proc is not None
        base = _rss_mb(srv._proc.pid)
        system = await connect(srv.url, name="system", creds=str(folder / "system.creds"))
        ref = await connect(srv.url, name="referee", creds=str(folder / "referee.creds"))
        took = await register_bots(folder, srv.url, bots, system)
        conns = await bots_online(folder, [srv.url], bots)
        subs = [await nc.subscribe(f"$SRV.INFO.bot{i:04d}", cb=_answer) for i, nc in enumerate(conns)]
        await asyncio.sleep(1)
        answered = 0
        for i in range(bots):
            try:
                await ref.request(f"$SRV.INFO.bot{i:04d}", b"", timeout=2)
                answered += 1
            except Exception:
                pass
        size = len(_referee_jwt(load_registry(folder)))
        rss = _rss_mb(srv._proc.pid)
        q = len(took) // 10 or 1
        print(
            f"{bots} bots registered: first {q} {sum(took[:q]) / q * 1000:.0f} ms each, "
            f"last {q} {sum(took[-q:]) / q * 1000:.0f} ms each, total {sum(took):.1f} s; "
            f"referee JWT {size / 1024:.0f} KiB; nats-server RSS {base:.0f} -> {rss:.0f} MB; "
            f"{answered}/{bots} answer $SRV.INFO",
            flush=True,
        )
        for sub in subs:  # each bot's own service answers from now on (one answer per request)
            await sub.unsubscribe()
        if seconds > 0:
            result = await play(folder, [srv.url], conns, ref, seconds, concurrency)
            print(f"{report_play(result)}, nats-server {_rss_mb(srv._proc.pid):.0f} MB", flush=True)
            print(f"load average {os.getloadavg()[0]:.1f}; logs in {folder}", flush=True)
        for nc in conns:
            await nc.close()
        await ref.close()
        await system.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bots", type=int, default=200)
    p.add_argument("--play", type=float, default=0.0, metavar="SECONDS", help="then play this long (0: no)")
    p.add_argument("--concurrency", type=int, default=8, help="the ladder's and referee's matches at once")
    a = p.parse_args()
    asyncio.run(main(a.bots, a.play, a.concurrency))
