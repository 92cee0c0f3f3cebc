"""A seeded set of matches whose every record and bus message is captured, for the byte-identity test.

The capture plays fixed match specs (fixed ids, seeds and chance secrets) one after another
through the real referee worker path (`RefereeWorker.play`: provenance from `$SRV.INFO`,
events through `EventPublisher`, `ended` stored in JetStream) against real agent services and
hand-written misbehaving bots, on a real nats-server. It covers imperfect-information and chance
games (Kuhn and Leduc poker), a simultaneous game (Goofspiel), a perfect-information game
(tic-tac-toe), and every fault reason under every fault policy.

What is captured, per match: the `ended` record as the worker returns it, and every message on
the prefix's subjects (turn requests with the reply each got, notifications, match events),
grouped by subject in arrival order. Grouping by subject (not one global order) is deliberate:
the order of messages on different subjects is not part of the protocol (a `moved` event may
reach a spectator before or after the next turn request), the bytes of each message and the
order on each subject are.

Normalised, and nothing else: the clock fields (`latency_ms`, `started_at`, `ended_at`,
`sent_at`) and the random inbox tokens of reply subjects (a reply is kept with the request it
answers). Replies to the referee's own control requests (JetStream API, the `ended` event's
publish ack with its stream sequence, `$SRV.INFO`) are left out: they carry server ids and dates, and
are NATS's bytes, not ours.
Regenerate the golden file with

    PYTHONPATH=$PWD .venv/bin/python -m tests.golden_capture

only when a change is *meant* to alter what goes on the wire or into a record (a protocol or
record change, a game's text view, a strategy's choices, a fault's detail text), and say so in
the commit; a speed-up must never need it.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from agents.random_agent import RandomStrategy
from agents.runtime import AgentService
from bus.connect import connect, flush
from bus.protocol import FaultPolicy, MatchSpec, Move, Turn
from bus.subjects import Subjects
from games.loader import parse_spec
from referee.worker import RefereeWorker

GOLDEN = Path(__file__).parent / "data" / "golden_matches.jsonl"
PREFIX = "golden"
INBOX = "golden_inbox"
AGENTS = ("rand-a", "rand-b", "raises", "illegal", "malformed", "silent")  # "absent" never listens
CLOCK_FIELDS = frozenset({"latency_ms", "started_at", "ended_at", "sent_at"})


class _Raises(Strategy):
    kind = "raises"

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        raise RuntimeError("this strategy always fails")


def _specs() -> list[MatchSpec]:
    out: list[MatchSpec] = []

    def add(game: str, seats: list[str], policy: FaultPolicy, deadline_ms: int = 3000) -> None:
        n = len(out) + 1
        out.append(
            MatchSpec(
                match_id=f"golden-{n:02d}",
                tournament="golden",
                game=parse_spec(game),
                seats=seats,
                seed=n,
                secret=f"golden-secret-{n}",
                deadline_ms=deadline_ms,
                policy=policy,
            )
        )

    forfeit, retry, rand = (
        FaultPolicy(kind="forfeit"),
        FaultPolicy(kind="retry", retries=1),
        FaultPolicy(kind="random"),
    )
    # Healthy play: chance + imperfect information, simultaneous, perfect information.
    for game in ("kuhn_poker", "leduc_poker", "goofspiel(num_cards=4)", "tic_tac_toe"):
        add(game, ["rand-a", "rand-b"], forfeit)
        add(game, ["rand-b", "rand-a"], rand)
    # Every fault reason under every policy (no_responder is never retried; its cost is its deadline).
    for policy in (forfeit, retry, rand):
        for bad in ("illegal", "malformed", "raises", "silent"):
            deadline = 300 if bad == "silent" else 3000
            add("kuhn_poker", [bad, "rand-a"], policy, deadline)
            add("goofspiel(num_cards=3)", ["rand-b", bad], policy, deadline)
        if policy is not retry:
            add("kuhn_poker", ["absent", "rand-a"], policy, 1000)
    return out


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: (0 if k in CLOCK_FIELDS and v is not None else _normalise(v)) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalise(v) for v in value]
    return value


def _payload(data: bytes) -> Any:
    try:
        return _normalise(json.loads(data))
    except ValueError:
        return {"raw": data.decode("utf-8", "replace")}


async def _raw_bot(nc: NATS, subjects: Subjects, name: str, answer: Callable[[Turn], bytes] | None) -> None:
    async def cb(msg: Msg) -> None:
        if answer is not None:
            await msg.respond(answer(Turn.model_validate_json(msg.data)))

    await nc.subscribe(subjects.turn(name), queue=name, cb=cb)


async def capture(url: str) -> list[dict[str, Any]]:
    """Play the golden specs on the server at `url`; one dict per match, in spec order."""
    subjects = Subjects(PREFIX)
    agent_nc = await connect(url, name="golden-agents")
    ref_nc = await nats.connect(url, name="golden-referee", inbox_prefix=INBOX)
    spy = await connect(url, name="golden-spy")
    seen: list[Msg] = []

    drained = asyncio.Event()

    async def keep(msg: Msg) -> None:
        seen.append(msg)
        if not any(sub.pending_msgs for sub in spy_subs):
            drained.set()

    # Not `golden.>`: a subscriber on the absent agent's turn subject would stop `no_responder`.
    spy_subs: list[Subscription] = []
    spy_subs += [
        await spy.subscribe(subject, cb=keep)
        for subject in (f"{PREFIX}.match.>", f"{PREFIX}.notify.>", *(subjects.turn(a) for a in AGENTS))
    ]
    spy_subs.append(await spy.subscribe(f"{INBOX}.>", cb=keep))
    await flush(spy)
    services = [
        AgentService(agent_nc, RandomStrategy(StrategyOptions(seed=7)), name="rand-a", subjects=subjects),
        AgentService(agent_nc, RandomStrategy(StrategyOptions(seed=8)), name="rand-b", subjects=subjects),
        AgentService(agent_nc, _Raises(StrategyOptions()), name="raises", subjects=subjects),
    ]
    for svc in services:
        await svc.start()
    illegal = Move(match_id="", turn=0, action=9999)
    await _raw_bot(
        agent_nc,
        subjects,
        "illegal",
        lambda t: (
            illegal.model_copy(update={"match_id": t.match_id, "turn": t.turn})
            .model_dump_json(exclude_none=True)
            .encode()
        ),
    )
    await _raw_bot(agent_nc, subjects, "malformed", lambda t: b"this is not json")
    await _raw_bot(agent_nc, subjects, "silent", None)
    await flush(agent_nc)
    # absent_limit_s=0: an absent agent is `no_responder` at its deadline, not waited for a minute.
    worker = RefereeWorker(ref_nc, subjects=subjects, absent_limit_s=0)
    out: list[dict[str, Any]] = []
    try:
        for spec in _specs():
            seen.clear()
            record = await worker.play(spec)
            await flush(ref_nc)
            await flush(agent_nc)
            await flush(spy)
            # The flush's PONG follows every message the spy was sent, so they are all queued; a
            # fixed pause for the callbacks missed a reply on a loaded machine. `keep` never
            # awaits, so an emptied queue means every message is in `seen`.
            drained.clear()
            if any(sub.pending_msgs for sub in spy_subs):
                await drained.wait()
            out.append(_match_capture(spec.match_id, record.model_dump_json(exclude_none=True), seen))
    finally:
        for svc in services:
            await svc.stop()
        for conn in (agent_nc, ref_nc, spy):
            await conn.drain()
    return out


def _match_capture(match_id: str, record_json: str, seen: list[Msg]) -> dict[str, Any]:
    requests: dict[str, dict[str, Any]] = {}  # reply subject -> the request's entry
    bus: dict[str, list[Any]] = {}
    for msg in seen:
        if msg.subject.startswith(INBOX + "."):
            continue
        item: dict[str, Any] = {"data": _payload(msg.data), "headers": msg.headers or {}}
        if msg.reply and ".turn." in msg.subject:  # other replies are JetStream's publish acks
            item["replies"] = []
            requests[msg.reply] = item
        bus.setdefault(msg.subject, []).append(item)
    # Replies after every request: each subscription has its own callback task, so the spy may
    # run a fast reply's callback before its request's.
    for msg in seen:
        if msg.subject.startswith(INBOX + "."):
            entry = requests.get(msg.subject)
            if entry is None:
                continue  # the referee's own control traffic: JetStream API and acks, `$SRV.INFO`
            entry["replies"].append({"data": _payload(msg.data), "headers": msg.headers or {}})
    return {"match_id": match_id, "record": _normalise(json.loads(record_json)), "bus": bus}


def dumps(captures: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(c, sort_keys=True) + "\n" for c in captures)


def main() -> None:
    from bus.server import EmbeddedNats

    with EmbeddedNats() as srv:
        captures = asyncio.run(capture(srv.url))
    GOLDEN.write_text(dumps(captures))
    print(f"wrote {len(captures)} matches to {GOLDEN}", file=sys.stderr)


if __name__ == "__main__":
    main()
