"""How fast bots register, and how many one nats-server in operator mode holds (bus/registry.py).

Registers `--bots` bots one after another through the registrar (in this process, the real code
path minus HTTP), each then connecting with its login and serving its discovery subject, on a
real nats-server from `spielbus auth init --registry`. Reports the time per registration (every
registration re-issues the referee account with all the bots' imports, so it grows with the
count), the referee account JWT's size, the server's resident memory (from /proc) and how many
bots answer the referee's `$SRV.INFO.<name>` at the end.

Run: .venv/bin/python benchmarks/registry_scale.py [--bots 200]
Limits: one machine, loopback, bots in one process (one connection each); no matches are played
(the ladder's own throughput is measured elsewhere).
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from nats.aio.msg import Msg

from bus import nats_jwt as J
from bus.connect import connect
from bus.registry import Registrar, RegistrationPolicy, _referee_jwt, init_registry, load_registry
from bus.server import EmbeddedNats


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _answer(msg: Msg) -> None:
    await msg.respond(b"{}")


async def main(bots: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="registry-scale-"))
    init_registry(folder)
    with EmbeddedNats(config=folder / "nats-server.conf") as srv:
        assert srv._proc is not None
        base = _rss_mb(srv._proc.pid)
        system = await connect(srv.url, name="system", creds=str(folder / "system.creds"))
        ref = await connect(srv.url, name="referee", creds=str(folder / "referee.creds"))
        registrar = Registrar(folder, RegistrationPolicy(policy="open", max_bots=bots), system)
        took: list[float] = []
        conns = []
        for i in range(bots):
            name = f"bot{i:04d}"
            seed = J.new_key("user")
            t0 = time.perf_counter()
            answer = await registrar.register(name, J.public_key(seed), J.public_key(J.new_key("user")))
            took.append(time.perf_counter() - t0)
            creds = folder / f"{name}.creds"
            assert answer.jwt is not None
            creds.write_text(J.creds_text(answer.jwt, seed))
            nc = await connect(srv.url, name=name, creds=str(creds))
            await nc.subscribe(f"$SRV.INFO.{name}", cb=_answer)
            conns.append(nc)
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
            f"{answered}/{bots} answer $SRV.INFO"
        )
        for nc in conns:
            await nc.close()
        await ref.close()
        await system.close()


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bots", type=int, default=200)
    asyncio.run(main(p.parse_args().bots))
