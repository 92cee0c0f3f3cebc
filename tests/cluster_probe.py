"""The cluster test's eyes inside its network namespaces (`python -m tests.cluster_probe MODE ...`).

The test process lives outside the namespaces it builds and cannot reach their addresses,
so it runs this helper inside one of them (`ip netns exec`). It logs in through
`bus.connect` with the accounts of a `spielbus auth init` folder, like any Spielbus process.

    watch --out FILE   a spectator following `spielbus.match.>` live, and a snooping agent
                       account subscribing to what it must not read (`>`, another agent's
                       turns, match events, `_INBOX.>`); every message either receives is a
                       JSON line {t, who, subject, data}; runs until SIGTERM
    info               JSON: each stream's replicas, leader and peers (as the referee)
    dump --out FILE    every event stored in SPIELBUS_MATCHES, in order, one JSON line each
                       (as the referee, through an ordered consumer)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
import time
from pathlib import Path
from typing import Any

from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy

from bus.auth import SPECTATOR_INBOX, login_for
from bus.connect import connect, flush
from bus.subjects import Subjects

S = Subjects()


async def _login(url: str, auth: str, role: str, agent: str | None = None) -> Any:
    user = login_for(auth, role, agent)  # type: ignore[arg-type]  # role: one of argparse's choices, each a Role
    inbox = SPECTATOR_INBOX if role == "spectator" else None
    return await connect(
        url, name=f"probe-{user.user}", user=user.user, password=user.password, inbox_prefix=inbox
    )


async def watch(args: argparse.Namespace) -> None:
    out = Path(args.out).open("a", encoding="utf-8")

    def keeper(who: str) -> Any:
        async def keep(msg: Msg) -> None:
            line = {"t": time.monotonic(), "who": who, "subject": msg.subject, "data": msg.data.decode()}
            out.write(json.dumps(line) + "\n")
            out.flush()

        return keep

    spectator = await _login(args.nats, args.auth, "spectator")
    await spectator.subscribe(f"{S.prefix}.match.>", cb=keeper("spectator"))
    snoop = await _login(args.nats, args.auth, "agent", args.snoop_as)
    for subject in (
        ">",
        S.turn(args.snoop_victim),
        f"{S.prefix}.match.>",
        "_INBOX.>",
        f"{S.prefix}.schedule",
    ):
        # Each is refused by the server (reported to the error callback); nothing may arrive.
        await snoop.subscribe(subject, cb=keeper("snoop"))
    await flush(spectator)
    await flush(snoop)
    print("watching", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    for nc in (spectator, snoop):
        with contextlib.suppress(Exception):
            await nc.close()
    out.close()


async def info(args: argparse.Namespace) -> None:
    nc = await _login(args.nats, args.auth, "referee")
    js = nc.jetstream(timeout=5)
    result: dict[str, Any] = {}
    for name in (S.matches_stream, S.schedule_stream):
        try:
            si = await js.stream_info(name)
        except Exception as exc:  # not there yet, or no leader at this moment
            result[name] = {"error": repr(exc)}
            continue
        cluster = si.cluster
        result[name] = {
            "replicas": si.config.num_replicas,
            "messages": si.state.messages,
            "leader": cluster.leader if cluster else None,
            "peers": [{"name": r.name, "current": r.current} for r in (cluster.replicas or [])]
            if cluster
            else [],
        }
    print(json.dumps(result), flush=True)
    await nc.close()


async def dump(args: argparse.Namespace) -> None:
    # As the referee: a spectator may not create consumers (bus/auth.py says why).
    nc = await _login(args.nats, args.auth, "referee")
    js = nc.jetstream(timeout=10)
    total = (await js.stream_info(S.matches_stream)).state.messages
    got: list[str] = []
    done = asyncio.Event()

    async def keep(msg: Msg) -> None:
        got.append(json.dumps({"subject": msg.subject, "data": msg.data.decode()}))
        if len(got) >= total:
            done.set()

    sub = await js.subscribe(
        f"{S.prefix}.match.>",
        cb=keep,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.ALL,
        stream=S.matches_stream,
    )
    if total:
        await asyncio.wait_for(done.wait(), timeout=60)
    await sub.unsubscribe()
    Path(args.out).write_text("".join(line + "\n" for line in got), encoding="utf-8")
    print(json.dumps({"messages": total, "dumped": len(got)}), flush=True)
    await nc.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.cluster_probe")
    p.add_argument("mode", choices=["watch", "info", "dump"])
    p.add_argument("--nats", required=True)
    p.add_argument("--auth", required=True)
    p.add_argument("--out", default=None)
    p.add_argument("--snoop-as", default=None, help="watch: the agent account that tries to snoop")
    p.add_argument("--snoop-victim", default=None, help="watch: the agent whose turns it tries to read")
    args = p.parse_args(argv)
    mode = {"watch": watch, "info": info, "dump": dump}[args.mode]
    asyncio.run(mode(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
