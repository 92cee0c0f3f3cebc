"""What a three-server NATS cluster with JetStream replicas holds for a ladder of registered bots.

Three nats-servers in operator mode (the configuration of `spielbus auth init --registry`, each
with its own full account resolver and JetStream store, routed into one cluster) on loopback
ports of this machine. Bots register through the registrar (connected to server 1; every
server's resolver takes the new accounts), then log in round-robin through the three servers and
serve turns; `spielbus referee` and `spielbus ladder` run as processes given all three URLs, with
`SPIELBUS_STREAM_REPLICAS=3` (both streams R3). The ladder's key-value bucket is created R3
beforehand, as an operator must: the ladder makes it with one replica when it is missing.
Half way through the window the server leading the bucket is SIGKILLed. Reported: matches per
minute before and after, whether every result stored before the kill is still read after it,
the bucket's replicas and new leader, and the servers' resident memory.

Run: .venv/bin/python benchmarks/registry_cluster.py [--bots 60] [--play 90]
Limits: one machine (three processes on loopback, not three hosts: tests/test_cluster.py has
network namespaces); the killed server is not restarted; bots in one process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from nats.aio.client import Client as NATS

from benchmarks.registry_scale import _rss_mb, counted, play, register_bots, report_play
from bus.connect import connect
from bus.registry import init_registry
from bus.server import find_binary
from bus.subjects import LADDER_BUCKET
from referee.ladder.store import LadderStore

SERVERS = 3
CLIENT = 14222  # server i listens on CLIENT + i, routes on ROUTE + i
ROUTE = 16222


def node_config(folder: Path, i: int) -> Path:
    """Server n<i+1>: the registry's configuration plus its own resolver folder, store and routes."""
    text = (folder / "nats-server.conf").read_text()
    conf = json.loads("".join(ln for ln in text.splitlines(True) if not ln.startswith("#")))
    conf["resolver"]["dir"] = str(folder / f"jwt{i + 1}")
    conf |= {
        "server_name": f"n{i + 1}",
        "listen": f"127.0.0.1:{CLIENT + i}",
        "jetstream": {"store_dir": str(folder / f"js{i + 1}")},
        "cluster": {
            "name": "spielbus",
            "listen": f"127.0.0.1:{ROUTE + i}",
            "routes": [f"nats://127.0.0.1:{ROUTE + j}" for j in range(SERVERS) if j != i],
        },
    }
    path = folder / f"n{i + 1}.conf"
    path.write_text(json.dumps(conf))
    return path


def start_servers(folder: Path) -> list[subprocess.Popen[bytes]]:
    procs = []
    for i in range(SERVERS):
        out = (folder / f"n{i + 1}.log").open("wb")
        procs.append(
            subprocess.Popen([find_binary(), "-c", str(node_config(folder, i))], stdout=out, stderr=out)
        )
    for i in range(SERVERS):
        log = folder / f"n{i + 1}.log"
        for _ in range(300):
            if "Server is ready" in log.read_text(errors="replace"):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError(f"server n{i + 1} did not start: {log.read_text()[-2000:]}")
    return procs


async def replicated_bucket(ref: NATS) -> None:
    """The ladder's bucket with three replicas, once the cluster has elected its meta leader."""
    js = ref.jetstream()
    for _ in range(60):
        try:
            await js.create_key_value(bucket=LADDER_BUCKET, history=1, replicas=SERVERS)
            return
        except Exception:  # "JetStream not ready" or a timeout while the cluster forms
            await asyncio.sleep(1)
    raise RuntimeError("the cluster's JetStream never took the bucket")


async def bucket_state(ref: NATS, stream: str = f"KV_{LADDER_BUCKET}") -> tuple[str, int]:
    """(a stream's leader, how many of its copies are current, the leader's included); by default
    the ladder's bucket."""
    info = await ref.jetstream().stream_info(stream)
    cluster = info.cluster
    assert cluster is not None
    current = sum(1 for r in cluster.replicas or [] if r.current and not r.offline)
    return str(cluster.leader), 1 + current


async def main(bots: int, seconds: float, concurrency: int) -> None:
    os.environ["SPIELBUS_STREAM_REPLICAS"] = str(SERVERS)  # for the referee and ladder processes
    folder = Path(tempfile.mkdtemp(prefix="registry-cluster-"))
    init_registry(folder)
    servers = start_servers(folder)
    urls = [f"nats://127.0.0.1:{CLIENT + i}" for i in range(SERVERS)]
    try:
        system = await connect(",".join(urls), name="system", creds=str(folder / "system.creds"))
        ref = await connect(",".join(urls), name="referee", creds=str(folder / "referee.creds"))
        await replicated_bucket(ref)
        took = await register_bots(folder, urls, bots, system)
        await asyncio.sleep(2)  # the other servers' resolvers take the claims by the system account
        conns = []
        for i in range(bots):
            mine = urls[i % SERVERS :] + urls[: i % SERVERS]  # its own server first, the others after
            conns.append(
                await connect(
                    ",".join(mine),
                    name=f"bot{i:04d}",
                    creds=str(folder / f"bot{i:04d}.creds"),
                    dont_randomize=True,
                )
            )
        leader, current = await bucket_state(ref)
        print(
            f"{bots} bots registered in {sum(took):.1f} s through n1, logged in through n1-n3; "
            f"bucket leader {leader}, {current} copies current; "
            f"servers RSS {' '.join(f'{_rss_mb(p.pid):.0f}' for p in servers)} MB",
            flush=True,
        )
        killed: dict[str, object] = {}

        async def kill_leader() -> None:
            before = await (await LadderStore.open(ref.jetstream(), LADDER_BUCKET)).results()
            name, _ = await bucket_state(ref)
            victim = servers[int(name[1:]) - 1]
            os.kill(victim.pid, signal.SIGKILL)
            victim.wait()
            killed.update(name=name, ids={r.match_id for r in before}, at=time.monotonic())
            print(f"killed {name} (the bucket's leader) with {len(before)} results stored", flush=True)

        result = await play(folder, urls, conns, ref, seconds, concurrency, midway=kill_leader)
        print(report_play(result), flush=True)
        after = {r.match_id for r in await (await LadderStore.open(ref.jetstream(), LADDER_BUCKET)).results()}
        ids = killed.get("ids", set())
        assert isinstance(ids, set)
        leader, current = await bucket_state(ref)
        print(
            f"matches/min before the kill {result.get('per_minute_before', 0):.0f}, after "
            f"{result.get('per_minute_after', 0):.0f}; results stored before the kill still read: "
            f"{len(ids & after)}/{len(ids)}; {len(after)} in all ({(await counted(ref))[1]} with a fault); "
            f"bucket leader now {leader}, {current} copies current; servers RSS "
            f"{' '.join(f'{_rss_mb(p.pid):.0f}' if p.poll() is None else 'killed' for p in servers)} MB; "
            f"load average {os.getloadavg()[0]:.1f}; logs in {folder}",
            flush=True,
        )
        for stream in ("SPIELBUS_MATCHES", "SPIELBUS_SCHEDULE"):
            leader, current = await bucket_state(ref, stream)
            print(f"stream {stream}: leader {leader}, {current} copies current", flush=True)
        for nc in (*conns, ref, system):
            await nc.close()
    finally:
        for p in servers:
            if p.poll() is None:
                p.terminate()
                p.wait(30)


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bots", type=int, default=60)
    p.add_argument("--play", type=float, default=90.0, metavar="SECONDS")
    p.add_argument("--concurrency", type=int, default=8, help="the ladder's and referee's matches at once")
    a = p.parse_args()
    asyncio.run(main(a.bots, a.play, a.concurrency))
