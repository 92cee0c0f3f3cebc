"""Killing the ladder process and a referee mid-match (SIGKILL, real processes, real nats-server):
the next ladder resumes the pending matches, the killed referee's match is replayed by another
referee and counted once, nothing counted before is lost; then Ctrl-C stops the ladder cleanly."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from pathlib import Path

import pytest
from nats.aio.msg import Msg
from nats.js.errors import KeyNotFoundError

from agents.base import Decision, MatchContext
from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.process import stop_process
from bus.protocol import MatchEvent, Turn
from referee.ladder.board import board
from referee.ladder.store import LadderStore, result_key
from referee.worker import RefereeWorker
from tests.helpers import serving, spielbus_process, uid, until


class SlowRandom(RandomStrategy):
    """A random player that thinks 0.3 s a move, so a match is in flight long enough to be killed."""

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        await asyncio.sleep(0.3)
        return await super().decide(turn, ctx)


@pytest.mark.slow
async def test_kill_ladder_and_referee_mid_match(nats_url: str, tmp_path: Path) -> None:
    a, b = uid("ka"), uid("kb")
    name, bucket = uid("kl"), uid("KILL").replace("-", "_")
    cfg = tmp_path / "ladder.toml"
    cfg.write_text(
        f'name = "{name}"\nbucket = "{bucket}"\nconcurrency = 2\nprobe_s = 0.5\ndeadline_ms = 5000\n'
        f'[[games]]\nname = "tic_tac_toe"\n[agents.{a}]\nconcurrency = 2\n[agents.{b}]\nconcurrency = 2\n'
    )
    nc = await connect(nats_url, name="ladder-kill")
    started: set[str] = set()
    ended: set[str] = set()

    async def on_event(msg: Msg) -> None:
        ev = MatchEvent.model_validate_json(msg.data)
        if ev.match_id.startswith(name):
            (started if ev.type == "started" else ended).add(ev.match_id)

    subs = [await nc.subscribe(f"spielbus.match.*.{t}", cb=on_event) for t in ("started", "ended")]
    store = await LadderStore.open(nc.jetstream(), bucket)
    procs: list[subprocess.Popen[str]] = []
    try:
        async with (
            serving(nc, SlowRandom.from_options({"seed": 1}), a),
            serving(nc, SlowRandom.from_options({"seed": 2}), b),
        ):
            referee = spielbus_process("referee", "--nats", nats_url, "--concurrency", "2")
            ladder = spielbus_process("ladder", str(cfg), "--nats", nats_url)
            procs += [referee, ladder]

            async def counted() -> set[str]:
                return {r.match_id for r in await store.results()}

            async def is_counted(mid: str) -> bool:
                # One key read, no consumer: the waits below ask many times.
                with contextlib.suppress(KeyNotFoundError):
                    return bool(await store.kv.get(result_key(mid)))
                return False

            def mid_match() -> bool:
                return len(ended) >= 2 and bool(started - ended)

            await until(mid_match, "two matches ended and one in flight", 180)
            for p in (referee, ladder):
                p.kill()
                p.wait(30)
            before = await counted()
            in_flight = started - ended
            # Another referee (in this process) and a new ladder on the same bucket.
            worker = RefereeWorker(nc, concurrency=2)
            wt = asyncio.create_task(worker.run())
            ladder2 = spielbus_process("ladder", str(cfg), "--nats", nats_url)
            procs.append(ladder2)

            async def resumed() -> bool:
                return all([await is_counted(m) for m in in_flight])

            # The killed referee's spec comes back after JetStream's ack wait (30 s).
            await until(resumed, "the matches killed mid-play are counted", 240)
            js = nc.jetstream()
            for mid in in_flight:
                rec = MatchEvent.model_validate_json(
                    (await js.get_last_msg("SPIELBUS_MATCHES", f"spielbus.match.{mid}.ended")).data or b""
                ).record
                assert rec is not None and rec.attempt >= 2, "replayed by another referee"
            # Ctrl-C: the ladder stops cleanly and says what it did.
            ladder2.send_signal(signal.SIGINT)
            out, _ = ladder2.communicate(timeout=60)
            assert ladder2.returncode == 0, out
            assert f"ladder {name} stopped" in out
            worker.stop()
            await asyncio.wait_for(wt, 60)
        results = await store.results()
        ids = [r.match_id for r in results]
        assert before <= set(ids) and len(ids) == len(set(ids))
        # Every counted match ended, every ended match is counted or still pending for the next
        # start (it ended after the stop), and no match is counted under two keys.
        pending = {p.spec.match_id for p in await store.pending()}
        assert set(ids) <= ended and ended - set(ids) <= pending
        assert sum(r.games for r in board(results)) == 2 * len(ids)
    finally:
        for p in procs:
            stop_process(p)
        for s in subs:
            await s.unsubscribe()
        await nc.drain()
