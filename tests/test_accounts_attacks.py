"""A hostile bot author against the accounts of `spielbus auth init`, on a real nats-server.

The attacker holds what its author is given: the bot's own login (`agent-mallory`) and its
bot-check login (`botcheck-mallory`), and uses both at once. `victim` is an honest agent;
the spectator login is the public one. Each test is an attack measured on the single shared
account that Spielbus used before (issue 24), and must change nothing now:

- the reply relay: the bot-check login asks its own bot with a reply subject of its choice
  and the bot answers once (a reply is always allowed) onto that subject: the JetStream API
  (purge, delete, read the schedule's specs and their chance secrets), match records, or
  another agent's turn and notify subjects;
- records forged during a run, with and without the referee's own `Nats-Msg-Id` (a forgery
  stored first made JetStream drop the referee's real record as a duplicate);
- a spectator's allowed JetStream reads, whose answer the server sends to whatever reply
  subject the request names: an agent's turns, or `spielbus.match.<id>.ended` (stored).

"Nothing happened" is checked after the attacker's messages have been answered and flushed
through the server, then the state is read back (a few reads over a second or two for the
JetStream API, which answers on its own workers).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.errors import NotFoundError

from agents.random_agent import RandomStrategy
from bus.auth import AuthBundle, load_auth
from bus.connect import flush
from bus.protocol import MatchEvent, MatchRecord
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects
from referee.acceptance import record_problem
from referee.collector import Collector, submit_and_collect
from referee.match import MatchRunner
from referee.worker import EventPublisher, RefereeWorker
from tests.helpers import quiet_logins, serving, spec, uid

ROOT = Path(__file__).resolve().parents[1]
S = Subjects()
MALLORY, VICTIM = "mallory", "victim"
AUTH_AGENTS = [MALLORY, VICTIM]  # the logins of tests/conftest.py's auth_dir
# Where the bot answers a relayed request: a header the bot-check login sets, the bot obeys.
RELAY = "Relay-Reply"
# Where a spectator's account may reach the JetStream read API (bus.auth.spectator_api).
SPECTATOR_API = f"{S.prefix}.replay.API"


@pytest.fixture(scope="module")
def auth(auth_server: EmbeddedNats, auth_dir: Path) -> tuple[EmbeddedNats, AuthBundle]:
    return auth_server, load_auth(auth_dir)


@pytest.fixture
async def login(auth: tuple[EmbeddedNats, AuthBundle]) -> AsyncIterator[Any]:
    async with quiet_logins(auth[0].url) as make:
        yield make


class Relay:
    """Mallory's two logins working together: the bot answers every request its bot-check login
    sends (marked with a header) with the request's own body and headers, onto the reply subject
    the bot-check chose; the answer's own reply subject is taken from the `Relay-Reply` header."""

    def __init__(self, bot: NATS, checker: NATS) -> None:
        self.bot = bot
        self.checker = checker
        self.answered = 0
        self._asked = 0
        self._all = asyncio.Event()
        self.heard: list[bytes] = []  # whatever reaches the checker's own inbox

    async def start(self) -> None:
        async def answer(msg: Msg) -> None:
            headers = dict(msg.headers or {})
            if headers.pop("Relay", None) is None:
                return  # a real turn from the referee: the honest agent service answers it
            back = headers.pop(RELAY, "")
            await self.bot.publish(msg.reply, msg.data, reply=back, headers=headers or None)
            self.answered += 1
            if self.answered >= self._asked:
                self._all.set()

        async def hear(msg: Msg) -> None:
            self.heard.append(msg.data)

        await self.bot.subscribe(S.turn(MALLORY), cb=answer)
        self.inbox = f"{self.checker._inbox_prefix.decode()}.relay"
        await self.checker.subscribe(f"{self.inbox}.>", cb=hear)
        await flush(self.bot)
        await flush(self.checker)

    async def send(
        self, target: str, body: bytes, *, back: str = "", headers: dict[str, str] | None = None
    ) -> None:
        """Have the bot publish `body` (and `headers`) to `target`, as its one allowed reply."""
        self._asked += 1
        self._all.clear()
        hdrs = {"Relay": "1", **({RELAY: back} if back else {}), **(headers or {})}
        await self.checker.publish(S.turn(MALLORY), body, reply=target, headers=hdrs)

    async def done(self) -> None:
        """Every relayed request answered by the bot and through the server."""
        await flush(self.checker)
        await asyncio.wait_for(self._all.wait(), timeout=20)
        await flush(self.bot)
        await flush(self.checker)


async def _relay(login: Any, bundle: AuthBundle) -> Relay:
    relay = Relay(await login(bundle.agent(MALLORY)), await login(bundle.botcheck(MALLORY)))
    await relay.start()
    return relay


async def _stays(check: Any, rounds: int = 8) -> None:
    """`check()` holds now and over the next few reads (the JetStream API answers asynchronously)."""
    for _ in range(rounds):
        await check()
        await asyncio.sleep(0.2)


async def _stored(js: Any, subject: str) -> bytes | None:
    try:
        return (await js.get_last_msg(S.matches_stream, subject)).data
    except NotFoundError:
        return None


class Inbox:
    """Everything an honest agent receives on its turn and notify subjects."""

    def __init__(self, nc: NATS) -> None:
        self.nc = nc
        self.got: list[tuple[str, bytes]] = []

    async def start(self, name: str) -> None:
        async def keep(msg: Msg) -> None:
            self.got.append((msg.subject, msg.data))

        await self.nc.subscribe(S.turn(name), cb=keep)
        await self.nc.subscribe(S.notify(name), cb=keep)
        await flush(self.nc)

    async def settled(self, ref: NATS, name: str) -> list[tuple[str, bytes]]:
        """What arrived besides one honest notification the referee sends now (it arrives last:
        everything the attacker sent was through the server before it)."""
        await ref.publish(S.notify(name), b"sentinel")
        await flush(ref)
        for _ in range(200):
            await flush(self.nc)
            if (S.notify(name), b"sentinel") in self.got:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError(f"the referee's own notification never reached {name}")
        return [g for g in self.got if g[1] != b"sentinel"]


async def test_reply_relay_cannot_reach_the_jetstream_api(login, auth) -> None:
    """Bot + bot-check logins together: purge and delete the match stream, read the specs and
    their chance secrets, store a record. None of it may happen."""
    _, bundle = auth
    ref = await login(bundle.referee())
    js = ref.jetstream()
    await ensure_streams(js, S)
    mid = uid("relay")
    await js.publish(S.match(mid, "started"), b'{"honest": true}')
    secret = uid("SECRET")
    secret_spec = spec("tic_tac_toe", [MALLORY, VICTIM]).model_copy(update={"secret": secret})
    await js.publish(S.schedule, secret_spec.model_dump_json().encode())
    before = (await js.stream_info(S.matches_stream)).state.messages
    queued = (await js.stream_info(S.schedule_stream)).state.messages
    relay = await _relay(login, bundle)
    forged = uid("forged")
    get_spec = json.dumps({"last_by_subj": S.schedule}).encode()
    for read in (f"$JS.API.STREAM.MSG.GET.{S.schedule_stream}", f"$JS.API.DIRECT.GET.{S.schedule_stream}"):
        await relay.send(read, get_spec, back=f"{relay.inbox}.spec")
    dedup = {"Nats-Msg-Id": f"{forged}.ended"}
    await relay.send(S.match(forged, "ended"), b'{"forged": true}', headers=dedup)
    await relay.send(f"$JS.API.STREAM.PURGE.{S.matches_stream}", b"{}", back=f"{relay.inbox}.purge")
    await relay.send(f"$JS.API.STREAM.DELETE.{S.schedule_stream}", b"", back=f"{relay.inbox}.delete")
    await relay.done()

    async def unchanged() -> None:
        assert (await js.stream_info(S.matches_stream)).state.messages == before
        assert (await js.stream_info(S.schedule_stream)).state.messages == queued
        assert await _stored(js, S.match(forged, "ended")) is None
        assert not any(secret.encode() in h for h in relay.heard), relay.heard

    await _stays(unchanged)


async def test_no_fake_turns_or_notifications_reach_another_agent(login, auth) -> None:
    _, bundle = auth
    ref = await login(bundle.referee())
    victim = Inbox(await login(bundle.agent(VICTIM)))
    await victim.start(VICTIM)
    relay = await _relay(login, bundle)
    fake = json.dumps({"v": 1, "type": "turn", "match_id": "fake", "turn": 1}).encode()
    for target in (S.turn(VICTIM), S.notify(VICTIM), f"$SRV.INFO.{VICTIM}"):
        await relay.bot.publish(target, fake)  # the bot's own login, directly
        await relay.checker.publish(target, fake)  # the bot-check login, directly
        await relay.send(target, fake)  # the bot's one reply, aimed there
    await relay.done()
    assert await victim.settled(ref, VICTIM) == []


async def test_spectator_reads_cannot_aim_their_answers(login, auth) -> None:
    """The spectator's JetStream reads answer to the request's reply subject: aimed at an agent's
    turns and at a match's `ended` subject, nothing may arrive there or be stored."""
    _, bundle = auth
    ref = await login(bundle.referee())
    js = ref.jetstream()
    await ensure_streams(js, S)
    await js.publish(S.match(uid("seen"), "ended"), json.dumps({"stored": "by the referee"}).encode())
    victim = Inbox(await login(bundle.agent(VICTIM)))
    await victim.start(VICTIM)
    spectator = await login(bundle.spectator())
    evil = uid("evil")
    targets = [S.turn(VICTIM), S.notify(VICTIM), S.match(evil, "ended")]
    reads = [
        f"$JS.API.STREAM.MSG.GET.{S.matches_stream}",
        f"$JS.API.DIRECT.GET.{S.matches_stream}",
        f"{SPECTATOR_API}.STREAM.MSG.GET.{S.matches_stream}",
    ]
    for read in reads:
        for target in targets:
            await spectator.publish(read, json.dumps({"seq": 1}).encode(), reply=target)
    await flush(spectator)
    assert await victim.settled(ref, VICTIM) == []

    async def nothing_stored() -> None:
        assert await _stored(js, S.match(evil, "ended")) is None

    await _stays(nothing_stored)


@pytest.mark.slow
async def test_forged_records_during_a_run_change_nothing(login, auth) -> None:
    """Mallory forges an `ended` record for every match of a run before it ends, half with the
    referee's own dedup id (`<match id>.ended`), half without, directly and through the relay.
    Every match must still be recorded, from the referee, with nothing rejected or pre-empted."""
    _, bundle = auth
    ref = await login(bundle.referee())
    js = ref.jetstream()
    await ensure_streams(js, S)
    specs = [spec("tic_tac_toe", [MALLORY, VICTIM] if i % 2 else [VICTIM, MALLORY], seed=i) for i in range(6)]
    relay = await _relay(login, bundle)
    for i, s in enumerate(specs):
        forged = (
            MatchEvent(
                type="ended",
                match_id=s.match_id,
                tournament=s.tournament,
                game=s.game,
                seats=s.seats,
                record=MatchRecord(
                    match_id=s.match_id,
                    tournament=s.tournament,
                    game=s.game,
                    seats=s.seats,
                    seed=s.seed,
                    returns=[1.0, -1.0] if s.seats[0] == MALLORY else [-1.0, 1.0],
                    ranks=[1, 2] if s.seats[0] == MALLORY else [2, 1],
                    outcome="decisive",
                    secret=s.secret,
                ),
            )
            .model_dump_json(exclude_none=True)
            .encode()
        )
        headers = {"Nats-Msg-Id": f"{s.match_id}.ended"} if i % 2 == 0 else None
        await relay.send(S.match(s.match_id, "ended"), forged, headers=headers)
        await relay.bot.publish(S.match(s.match_id, "ended"), forged, headers=headers)
        await relay.checker.publish(S.match(s.match_id, "ended"), forged, headers=headers)
    await relay.done()
    agent_logins = {n: await login(bundle.agent(n)) for n in (MALLORY, VICTIM)}
    worker = RefereeWorker(ref, subjects=S, concurrency=3)
    task = asyncio.create_task(worker.run())
    try:
        async with (
            serving(agent_logins[MALLORY], RandomStrategy.from_options({"seed": 1}), MALLORY),
            serving(agent_logins[VICTIM], RandomStrategy.from_options({"seed": 2}), VICTIM),
        ):
            got: list[MatchRecord] = []
            collector = Collector(specs, got.append)
            await submit_and_collect(
                ref, specs, S, got.append, collector=collector, deadline_s=120, idle_s=60
            )
    finally:
        worker.stop()
        await asyncio.gather(task, return_exceptions=True)
    assert collector.failed == {} and collector.rejected == 0
    assert sorted(r.match_id for r in got) == sorted(s.match_id for s in specs)
    for s in specs:
        stored = await _stored(js, S.match(s.match_id, "ended"))
        assert stored is not None
        event = MatchEvent.model_validate_json(stored)
        assert record_problem(s, event) is None
        assert event.record is not None and event.record.moves  # played, not the forgery's empty record


@pytest.mark.slow
async def test_an_embedded_run_with_an_external_bot_is_closed_by_default(tmp_path: Path) -> None:
    """`spielbus run` with an external agent and no `--auth`: the embedded server has accounts, the
    run prints the bot's login file and command, the bot joins with that file alone, and a local
    sniper without a login cannot even connect (it used to answer r1's turns first)."""
    toml = tmp_path / "t.toml"
    toml.write_text(
        'name = "closed"\ngames_per_pairing = 2\ndeadline_ms = 5000\n[[games]]\nname = "tic_tac_toe"\n'
        '[agents.r1]\nkind = "random"\n[agents.ext]\nkind = "external"\nexternal = true\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    cmd = [
        sys.executable,
        "-m",
        "spielbus.cli",
        "run",
        str(toml),
        "--quiet",
        "--run-dir",
        str(tmp_path / "runs"),
    ]
    cmd += ["--metrics-port", "off", "--web-port", "off"]
    run = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    bot: subprocess.Popen[bytes] | None = None
    seen: list[str] = []
    try:
        assert run.stdout is not None
        url = login = None
        while login is None:
            line = await asyncio.to_thread(run.stdout.readline)
            assert line, "spielbus run ended before naming the bot's login file:\n" + "".join(seen)
            seen.append(line)
            if m := re.search(r"Embedded nats-server at (\S+)", line):
                url = m.group(1)
            if m := re.search(r"External bot ext: its login file is (\S+)", line):
                login = m.group(1)
        assert url is not None and f"NATS_URL={url}" in Path(login).read_text()
        with pytest.raises(Exception, match=r"(?i)authorization"):
            await nats.connect(url, allow_reconnect=False, max_reconnect_attempts=0)
        bot_cmd = [sys.executable, str(ROOT / "examples" / "bots" / "python_bot.py"), "--name", "ext"]
        bot = subprocess.Popen([*bot_cmd, "--login", login], env=env, stdout=subprocess.DEVNULL)
        out, _ = await asyncio.to_thread(run.communicate, timeout=300)
        seen.append(out)
    finally:
        for proc in (run, bot):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                await asyncio.to_thread(proc.wait, 30)
    assert run.returncode == 0, "".join(seen)
    (folder,) = (tmp_path / "runs").iterdir()
    records = [json.loads(x) for x in (folder / "matches.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["faults"] == [] for r in records)


async def test_a_forged_ended_on_an_open_bus_does_not_skip_a_redelivered_match(nc: NATS) -> None:
    """On an open bus (built-in agents only) anyone may store an `ended` event; a referee given a
    redelivered spec must not take a forgery for the match's record and skip the match."""
    js = nc.jetstream()
    await ensure_streams(js, S)
    worker = RefereeWorker(nc, subjects=S)
    match = spec("tic_tac_toe", [MALLORY, VICTIM])
    assert not await worker._already_ended(match)
    forged = {"v": 1, "type": "ended", "match_id": match.match_id, "tournament": match.tournament}
    await js.publish(S.match(match.match_id, "ended"), json.dumps(forged).encode())
    assert not await worker._already_ended(match)
    async with (
        serving(nc, RandomStrategy.from_options({"seed": 1}), MALLORY),
        serving(nc, RandomStrategy.from_options({"seed": 2}), VICTIM),
    ):  # the referee's own record, stored after the forgery
        await MatchRunner(nc, match, subjects=S, publish_event=EventPublisher(nc, S)).run()
    assert await worker._already_ended(match)
