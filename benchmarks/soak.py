"""Soak: many fast matches in one `spielbus run`, with the live page and the metrics on.

N matches (default 10,000) of two `random` agents on tic-tac-toe, concurrency 16,
deadline 300 ms, through `spielbus.run.run_tournament` exactly as `spielbus run`
plays them (embedded nats-server, agents as child processes, live page and
Prometheus endpoint on, scraped once a second as Prometheus would, and the page's
standings asked for every two seconds as an open browser tab does). It prints:

- matches per second over the first and the last thousand matches (by the
  referee's end times) and their ratio (the goal: last >= 0.9 of first);
- forfeits and faults by reason (the goal: none);
- the referee's event-loop lag (a 20 ms ticker in the run's own loop: how late it
  wakes), percentiles from the first match's end to the last one's;
- the resident memory (RSS) of every process (this one, nats-server, each agent)
  when the first match ends and when the last one does, and the run process's
  growth per match; the objects its garbage collector tracks, first and last;
- the run process's full garbage collections (count, longest pause in wall time
  and in CPU time: on a loaded machine the wall time includes waiting for a core);
- each process's CPU use (share of one core) and the load average: which process
  the run waits for, and how loaded the machine was;
- for each forfeit, the worst loop lag and full collection of the run process in
  the second before its match ended (was it the referee's own stall?).

    .venv/bin/python benchmarks/soak.py [--matches 3000] [--concurrency 16] [--deadline-ms 300]

Limits: one machine; RSS is read from /proc (Linux only); timings on a shared
machine are noisy, which is why the figure is a ratio measured within one run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from rich.console import Console

from referee.config import parse_config
from spielbus.run import RunOptions, run_tournament

TOURNAMENT = """
name = "soak"
games_per_pairing = {per_order}
concurrency = {concurrency}
deadline_ms = {deadline}
max_matches = {max_matches}
seed = 1
[[games]]
name = "tic_tac_toe"
[agents.rand_a]
kind = "random"
[agents.rand_b]
kind = "random"
"""


def _rss_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of `pid` so far (from /proc/PID/stat)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children(pid: int) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            fields = (p / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            out.append(int(p.name))
    return out


def _name(pid: int) -> str:
    try:
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return str(pid)
    words = [w.decode(errors="replace") for w in cmd if w]
    if any("nats-server" in w for w in words):
        return "nats-server"
    if "--name" in words:
        i = words.index("--name")
        return f"agent {words[i + 1]}" if i + 1 < len(words) else "agent"
    return " ".join(words[:3])[:60]


RUN = "run (referee, page, metrics)"


def _snapshot() -> dict[str, tuple[int, float]]:
    """(RSS in KB, CPU seconds so far) of this process and each child."""
    me = os.getpid()
    out = {RUN: (_rss_kb(me) or 0, _cpu_s(me) or 0.0)}
    for pid in _children(me):
        rss = _rss_kb(pid)
        if rss:
            name = _name(pid)
            while name in out:
                name += "'"
            out[name] = (rss, _cpu_s(pid) or 0.0)
    return out


class Watcher:
    """In the run's own event loop: loop lag, RSS samples, a Prometheus-like scrape, a page poll."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.lags: list[tuple[float, float]] = []  # (wall time, lag in ms)
        self.samples: list[tuple[float, dict[str, tuple[int, float]]]] = []
        self.metrics_url: str | None = None
        self.web_url: str | None = None
        self.scrapes = 0
        self.page_polls = 0
        # Full (generation 2) garbage collections of the run process: (wall time, pause in ms,
        # the pause in this thread's CPU time: what the collection itself cost, whatever the
        # machine's load added while the process waited for a core).
        self.gc2: list[tuple[float, float, float]] = []
        self._gc_t0 = self._gc_c0 = 0.0
        # Objects the garbage collector tracks (gc.get_objects), every ten seconds: bounded or not.
        self.objects: list[tuple[float, int]] = []
        gc.callbacks.append(self._gc)

    def _gc(self, phase: str, info: dict[str, int]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._gc_t0, self._gc_c0 = time.perf_counter(), time.thread_time()
        else:
            wall = (time.perf_counter() - self._gc_t0) * 1000
            self.gc2.append((time.time(), wall, (time.thread_time() - self._gc_c0) * 1000))

    async def lag(self, period: float = 0.02) -> None:
        loop = asyncio.get_running_loop()
        while True:
            t = loop.time()
            await asyncio.sleep(period)
            self.lags.append((time.time(), (loop.time() - t - period) * 1000))

    async def sample(self) -> None:
        n = 0
        while True:
            self.samples.append((time.time(), await asyncio.to_thread(_snapshot)))
            if n % 10 == 0:
                self.objects.append((time.time(), len(gc.get_objects())))
            n += 1
            await asyncio.sleep(1.0)

    def _get(self, url: str) -> None:
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                resp.read()
        except OSError:
            pass

    async def visitors(self) -> None:
        """Prometheus scrapes every second; a page tab asks for standings every two."""
        n = 0
        while True:
            await asyncio.sleep(1.0)
            n += 1
            if self.metrics_url:
                await asyncio.to_thread(self._get, self.metrics_url)
                self.scrapes += 1
            if self.web_url and n % 2 == 0:
                await asyncio.to_thread(self._get, self.web_url + "api/standings")
                self.page_polls += 1

    def near(self, t: float) -> dict[str, tuple[int, float]]:
        return min(self.samples, key=lambda s: abs(s[0] - t))[1] if self.samples else {}


def _rate(ends: list[float], lo: int, hi: int) -> float:
    """Matches per second between the lo-th and hi-th end (hi - lo matches)."""
    span = ends[hi] - ends[lo]
    return (hi - lo) / span if span > 0 else float("inf")


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))] if xs else float("nan")


async def soak(args: argparse.Namespace) -> int:
    run_dir = Path(tempfile.mkdtemp(prefix="spielbus-soak-"))
    config = parse_config(
        TOURNAMENT.format(
            per_order=max(1, args.matches // 2),
            concurrency=args.concurrency,
            deadline=args.deadline_ms,
            max_matches=max(100_000, args.matches),
        )
    )
    watcher = Watcher(run_dir)
    opts = RunOptions(
        run_dir=str(run_dir),
        quiet=True,
        metrics_port=args.metrics_port,
        web_port=args.web_port,
        agent_wait_s=120,
    )
    console = Console(stderr=True)

    class Spy(Console):
        """Learns where the page and the metrics are from the lines `spielbus run` prints."""

        def print(self, *objects: Any, **kw: Any) -> None:
            text = " ".join(str(o) for o in objects)
            if text.startswith("Live match page: "):
                watcher.web_url = text.split(": ", 1)[1].strip()
            elif text.startswith("Prometheus metrics: "):
                watcher.metrics_url = text.split(": ", 1)[1].strip()
            if not args.quiet:
                console.print(*objects, **kw)

    tasks = [asyncio.create_task(c) for c in (watcher.lag(), watcher.sample(), watcher.visitors())]
    t0 = time.time()
    try:
        result = await run_tournament(config, opts, Spy(stderr=True, quiet=args.quiet))
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    wall = time.time() - t0
    records = result.records
    ends = sorted(r.ended_at for r in records)
    n = len(ends)
    k = min(1000, max(1, n // 3))
    first = _rate(ends, 0, k - 1) if n > 1 else float("nan")
    last = _rate(ends, n - k, n - 1) if n > 1 else float("nan")
    outcomes = Counter(r.outcome for r in records)
    faults = Counter(f.reason for r in records for f in r.faults)
    start, end = watcher.near(ends[0]) if ends else {}, watcher.near(ends[-1]) if ends else {}
    # While matches were being played (not the start-up, nor the final report's computation).
    lags = [ms for t, ms in watcher.lags if ends and ends[0] <= t <= ends[-1]]
    objs = [k for t, k in watcher.objects if ends and ends[0] <= t <= ends[-1]]
    out: dict[str, Any] = {
        "matches": n,
        "wall_s": round(wall, 1),
        "window": k,
        "first_matches_per_s": round(first, 2),
        "last_matches_per_s": round(last, 2),
        "ratio_last_to_first": round(last / first, 3) if first else None,
        "outcomes": dict(outcomes),
        "forfeits": outcomes.get("forfeit", 0),
        "faults": dict(faults),
        "loop_lag_ms": {
            "p50": round(_pct(lags, 0.50), 2),
            "p90": round(_pct(lags, 0.90), 2),
            "p99": round(_pct(lags, 0.99), 2),
            "p999": round(_pct(lags, 0.999), 2),
            "max": round(max(lags), 2) if lags else None,
            "ticks": len(lags),
        },
        "gc_full_collections": {
            "count": len(gc2 := [g for g in watcher.gc2 if ends and ends[0] <= g[0] <= ends[-1]]),
            "max_ms": round(max(g[1] for g in gc2), 1) if gc2 else None,
            "total_ms": round(sum(g[1] for g in gc2), 1),
            "max_cpu_ms": round(max(g[2] for g in gc2), 1) if gc2 else None,
        },
        "gc_tracked_objects_first_last": [objs[0], objs[-1]] if objs else [],
        # For each forfeit: the worst loop lag and the longest full collection of the run process
        # within a second before its match ended (the referee's stall, if any, that it met).
        "forfeits_context": [
            {
                "match": r.match_id.rsplit("-", 1)[-1],
                "faults": [f"{f.reason}: {f.detail[:70]}" for f in r.faults],
                "max_lag_ms_1s_before": round(
                    max([ms for t, ms in watcher.lags if r.ended_at - 1 <= t <= r.ended_at], default=0.0), 1
                ),
                "gc2_ms_1s_before": round(
                    max([g[1] for g in watcher.gc2 if r.ended_at - 1 <= g[0] <= r.ended_at], default=0.0), 1
                ),
            }
            for r in records
            if r.outcome == "forfeit"
        ][:30],
        "rss_kb_start": {k: v[0] for k, v in start.items()},
        "rss_kb_end": {k: v[0] for k, v in end.items()},
        "run_rss_growth_kb_per_match": round(
            (end.get(RUN, (0, 0.0))[0] - start.get(RUN, (0, 0.0))[0]) / max(n - 1, 1), 2
        ),
        # Share of one core each process used between the first and the last match's end: which
        # process the run waits for (the machine's load average is beside it: a shared machine).
        "cpu_share_of_one_core": {
            k: round((end[k][1] - start[k][1]) / max(ends[-1] - ends[0], 1e-9), 2) for k in end if k in start
        }
        if ends
        else {},
        "load_average_end": os.getloadavg(),
        "scrapes": watcher.scrapes,
        "page_polls": watcher.page_polls,
        "run_folder": str(result.path),
    }
    print(json.dumps(out, indent=2))
    ok = first and last / first >= 0.9 and not out["forfeits"]
    print(
        f"soak: {n} matches in {wall:.0f} s; {first:.1f} -> {last:.1f} matches/s over the first and last {k} "
        f"(ratio {last / first:.2f}, goal >= 0.90); {out['forfeits']} forfeits; loop lag p50/p99 "
        f"{out['loop_lag_ms']['p50']}/{out['loop_lag_ms']['p99']} ms; run process "
        f"{out['run_rss_growth_kb_per_match']} KB per match: {'OK' if ok else 'BELOW GOAL'}"
    )
    return 0


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--matches", type=int, default=10_000, help="matches to play (default 10,000)")
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--deadline-ms", type=int, default=300)
    p.add_argument("--metrics-port", type=int, default=0, help="0: any free port (default)")
    p.add_argument("--web-port", type=int, default=0, help="0: any free port (default)")
    p.add_argument("--quiet", action="store_true", help="only the results")
    args = p.parse_args()
    return asyncio.run(soak(args))


if __name__ == "__main__":
    raise SystemExit(main())
