#!/usr/bin/env python3
"""A complete Spielbus bot in plain nats-py: it imports nothing of Spielbus, only the protocol.

    pip install nats-py
    NATS_URL=nats://127.0.0.1:4222 python python_bot.py --name mybot

What it does, and what any bot must do (docs/protocol.md has the details):

- register as a NATS micro service named after the bot (so `$SRV.PING` / `$SRV.INFO` find it);
- answer `turn` requests on `spielbus.turn.<name>` in queue group `<name>` with a `move`;
- listen to `spielbus.notify.<name>` for `match_started` / `match_ended`;
- ignore unknown fields (newer referees add some), and never crash on odd input.

Its strategy is deliberately simple: a uniformly random legal action, or (with
`--strategy first`) the first legal one. Replace `choose()` with your own.
Credentials: `--login FILE`, the bot's one login file (`agents/<name>.env` of `spielbus auth
init`, or the file `spielbus run` writes and names for an external bot: NATS_URL, NATS_USER,
NATS_PASSWORD), else the environment: NATS_USER / NATS_PASSWORD or NATS_CREDS (a .creds file).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import os
import random
import signal
from typing import Any

import nats
from nats.aio.msg import Msg
from nats.micro import add_service
from nats.micro.request import Request
from nats.micro.service import EndpointConfig, ServiceConfig

PROTOCOL_VERSION = 1
log = logging.getLogger("python_bot")


class Bot:
    def __init__(self, name: str, strategy: str, seed: int | None) -> None:
        self.name = name
        self.strategy = strategy
        self.rng = random.Random(seed)
        # Per-match state, keyed by match id: set up on match_started, dropped on match_ended.
        self.matches: dict[str, dict[str, Any]] = {}
        self.tasks: set[asyncio.Task[None]] = set()

    def choose(self, turn: dict[str, Any]) -> int:
        """Pick a legal action id. `turn` holds observation, legal_actions, history, rules, retry..."""
        legal = turn["legal_actions"]
        if self.strategy == "first":
            return int(legal[0]["id"])
        return int(self.rng.choice(legal)["id"])

    async def on_turn(self, req: Request) -> None:
        # One task per request, so that a slow decision does not hold up other matches.
        task = asyncio.create_task(self.answer(req))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def answer(self, req: Request) -> None:
        try:
            turn = json.loads(req.data)
            if turn.get("type") != "turn" or not turn.get("legal_actions"):
                raise ValueError("not a turn with legal actions")
            if turn.get("v") != PROTOCOL_VERSION:  # never guess at another version's meaning
                raise ValueError(f"protocol version {turn.get('v')!r} not spoken; this bot speaks 1")
            if turn.get("retry"):
                log.info("match %s: previous answer refused: %s", turn.get("match_id"), turn["retry"])
            move = {
                "v": PROTOCOL_VERSION,
                "type": "move",
                "match_id": turn["match_id"],
                "turn": turn["turn"],  # echo the counter: a stale answer is refused
                "action": self.choose(turn),
                "note": f"{self.strategy} choice",
            }
        except Exception as exc:  # a bad request gets a service error, never a crash
            await req.respond_error("400", f"cannot play this turn: {exc}"[:200])
            return
        await req.respond(json.dumps(move).encode())

    async def on_notify(self, msg: Msg) -> None:
        try:
            note = json.loads(msg.data)
            kind, match_id = note.get("type"), note.get("match_id")
        except (ValueError, AttributeError):
            return
        if kind == "match_started":
            self.matches[match_id] = {"seat": note.get("seat"), "seats": note.get("seats")}
        elif kind == "match_ended":
            self.matches.pop(match_id, None)


def read_login(path: str) -> dict[str, str]:
    """A login file: `KEY=VALUE` lines, `#` comments."""
    with open(path, encoding="utf-8") as fh:
        lines = [ln.strip() for ln in fh if "=" in ln and not ln.lstrip().startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--name", default=os.environ.get("BOT_NAME", "python_bot"), help="agent name")
    ap.add_argument("--nats", default=None, help="NATS URL (default: the login file's, $NATS_URL, local)")
    ap.add_argument("--login", default=None, metavar="FILE", help="login file: KEY=VALUE lines")
    ap.add_argument("--prefix", default=os.environ.get("SPIELBUS_PREFIX", "spielbus"))
    ap.add_argument("--strategy", choices=["random", "first"], default="random")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "INFO"))

    env = {**os.environ, **(read_login(args.login) if args.login else {})}  # the file wins
    url = args.nats or env.get("NATS_URL") or "nats://127.0.0.1:4222"
    opts: dict[str, Any] = {"name": f"bot-{args.name}", "max_reconnect_attempts": -1}
    if env.get("NATS_CREDS"):
        opts["user_credentials"] = env["NATS_CREDS"]
    if env.get("NATS_USER"):
        opts["user"] = env["NATS_USER"]
        opts["password"] = env.get("NATS_PASSWORD", "")

    async def on_error(exc: Exception) -> None:
        # Permission violations arrive here: log them, they mean a misconfigured account.
        log.warning("nats: %s", exc)

    # `--nats` may list several servers of one cluster, comma-separated; the client moves between them.
    servers = [u.strip() for u in url.split(",") if u.strip()]
    nc = await nats.connect(servers, error_cb=on_error, **opts)
    bot = Bot(args.name, args.strategy, args.seed)
    service = await add_service(
        nc,
        ServiceConfig(
            name=args.name,
            version="1.0.0",
            description="example Spielbus bot in plain nats-py",
            metadata={"kind": "example-python", "games": "*", "protocol": str(PROTOCOL_VERSION)},
            # nats-py's micro puts endpoints in queue group "q" unless told: Spielbus needs the name.
            queue_group=args.name,
        ),
    )
    await service.add_endpoint(
        EndpointConfig(
            name="turn",
            subject=f"{args.prefix}.turn.{args.name}",
            queue_group=args.name,
            handler=bot.on_turn,
        )
    )
    notify = await nc.subscribe(f"{args.prefix}.notify.{args.name}", cb=bot.on_notify)
    # nats-py 2.16's flush() writes its PING ahead of the SUBs still queued above, so its PONG alone
    # would not mean "subscribed": write the queue out first (a private call; none public waits).
    await nc._flush_pending(force_flush=True)
    await nc.flush()
    log.info("bot %s serving %s.turn.%s on %s", args.name, args.prefix, args.name, args.nats)
    print("ready", flush=True)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    # Drain: stop taking turns, finish the ones in flight, then close.
    await service.stop()
    with contextlib.suppress(Exception):
        await notify.unsubscribe()
    if bot.tasks:
        await asyncio.gather(*list(bot.tasks), return_exceptions=True)
    await nc.drain()


if __name__ == "__main__":
    asyncio.run(main())
