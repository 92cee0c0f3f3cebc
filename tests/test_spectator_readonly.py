"""The spectator account is read-only, measured against a real nats-server with the auth config.

A JetStream consumer delivers to whatever subject its creator names in the request body,
which subject permissions cannot see: a spectator allowed to create consumers can make the
server push stored match events into an agent's turn or notify subject. So the spectator
may create no consumer at all (push, pull, ephemeral or durable) and delete none; it reads
the stream one stored message at a time (`STREAM.MSG.GET`, through the `replay` login) and
follows it with `bus.follow.follow_stream`, which is enough to drive the live page's `MatchFeed`.

A request's answer lands on whatever reply subject the requester names inside its own account,
so the feed (`spectator`, account `spectators`) and the reads (`replay`, account `replay`) are
apart: no spectator can aim a JetStream answer at `spielbus.match.>` where the others listen.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, RawStreamMsg

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from bus.auth import AuthBundle, AuthUser, config_path, load_auth, spectator_api, write_auth
from bus.connect import flush
from bus.follow import follow_stream
from bus.protocol import MatchEvent
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import Subjects
from observability.web.feed import MatchFeed
from referee.match import MatchRunner
from referee.worker import EventPublisher
from tests.helpers import serving, spec

S = Subjects()
VICTIM = "victim"


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedNats, AuthBundle]]:
    out: Path = tmp_path_factory.mktemp("spectator-auth")
    write_auth([VICTIM, "player"], out)
    with EmbeddedNats(config=config_path(out)) as srv:
        yield srv, load_auth(out)


@pytest.fixture
async def login(auth: tuple[EmbeddedNats, AuthBundle]) -> AsyncIterator[object]:
    srv, _ = auth
    opened: list[NATS] = []

    async def make(user: AuthUser, errors: list[str] | None = None) -> NATS:
        async def on_error(exc: Exception) -> None:
            if errors is not None:
                errors.append(str(exc))

        nc = await nats.connect(
            srv.url,
            user=user.user,
            password=user.password,
            inbox_prefix=user.inbox_prefix() or "_INBOX",
            error_cb=on_error,
        )
        opened.append(nc)
        return nc

    yield make
    for nc in opened:
        await nc.close()


async def _refused(nc: NATS, subject: str, body: Mapping[str, object]) -> None:
    """The request gets no answer: the server refused the publish (a permission violation)."""
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=0.5)
        raise AssertionError(f"{subject} answered: {reply.data[:200]!r}")


async def test_spectator_cannot_create_or_delete_consumers(login, auth) -> None:
    _, bundle = auth
    ref = await login(bundle.referee())
    js_ref = ref.jetstream()
    await ensure_streams(js_ref, S)
    await js_ref.publish(S.match("sro1", "ended"), b'{"n": 1}')
    victim = await login(bundle.agent(VICTIM))
    injected: list[bytes] = []

    async def keep(msg: Msg) -> None:
        injected.append(msg.data)

    await victim.subscribe(S.turn(VICTIM), cb=keep)
    await victim.subscribe(S.notify(VICTIM), cb=keep)
    await flush(victim)
    errors: list[str] = []
    spectator = await login(bundle.spectator(), errors)
    stream = S.matches_stream
    push_into_turns = {
        "stream_name": stream,
        "config": {"deliver_subject": S.turn(VICTIM), "ack_policy": "none", "deliver_policy": "all"},
    }
    push_into_notify = {
        "stream_name": stream,
        "config": {"deliver_subject": S.notify(VICTIM), "ack_policy": "none", "deliver_policy": "all"},
    }
    await _refused(spectator, f"$JS.API.CONSUMER.CREATE.{stream}", push_into_turns)
    await _refused(spectator, f"$JS.API.CONSUMER.CREATE.{stream}.evil", push_into_notify)
    durable = {"stream_name": stream, "config": {"durable_name": "evil", "ack_policy": "explicit"}}
    await _refused(spectator, f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.evil", durable)
    pull = {"stream_name": stream, "config": {"name": "evil2", "ack_policy": "explicit"}}
    await _refused(spectator, f"$JS.API.CONSUMER.CREATE.{stream}.evil2", pull)
    # A consumer someone else made cannot be deleted (nor read as a pull consumer) by the spectator.
    await js_ref.add_consumer(stream, ConsumerConfig(durable_name="kept", ack_policy=AckPolicy.EXPLICIT))
    await _refused(spectator, f"$JS.API.CONSUMER.DELETE.{stream}.kept", {})
    await _refused(spectator, f"$JS.API.CONSUMER.MSG.NEXT.{stream}.kept", {"batch": 1})
    info = await js_ref.stream_info(stream)
    assert info.state.consumer_count == 1  # "kept" alone: none of the spectator's was made
    assert any("permissions violation" in e.lower() for e in errors), errors
    # Nothing reached the victim: the referee publishes one more event, which no consumer delivers.
    await js_ref.publish(S.match("sro2", "ended"), b'{"n": 2}')
    await flush(victim)
    assert injected == []


async def test_spectator_follows_the_stream_read_only_and_feeds_the_live_page(login, auth) -> None:
    _, bundle = auth
    ref = await login(bundle.referee())
    await ensure_streams(ref.jetstream(), S)
    player = await login(bundle.agent("player"))
    publisher = EventPublisher(ref, S)
    errors: list[str] = []
    spectator = await login(bundle.spectator(), errors)
    reader = await login(bundle.replay(), errors)
    feed = MatchFeed(S)
    events: list[MatchEvent] = []
    got_second = asyncio.Event()

    async def on_stored(msg: RawStreamMsg) -> None:
        assert msg.data is not None
        event = MatchEvent.model_validate_json(msg.data)
        events.append(event)
        feed.apply(event)
        if event.match_id == second.match_id and event.type == "ended":
            got_second.set()

    first = spec("tic_tac_toe", ["player", "player"])
    second = spec("tic_tac_toe", ["player", "player"])
    async with serving(player, RandomStrategy(StrategyOptions(seed=3)), "player"):
        await MatchRunner(ref, first, subjects=S, publish_event=publisher).run()  # stored before we follow
        follower = await follow_stream(
            spectator,
            S.matches_stream,
            f"{S.prefix}.match.>",
            on_stored,
            api_prefix=spectator_api(S),
            reads=reader,
        )
        await MatchRunner(ref, second, subjects=S, publish_event=publisher).run()  # played while we follow
        await asyncio.wait_for(got_second.wait(), timeout=20)
        await follower.unsubscribe()
    ended = [e.match_id for e in events if e.type == "ended"]
    assert first.match_id in ended and second.match_id in ended
    assert feed.matches[first.match_id].status == "ended"
    assert feed.matches[second.match_id].status == "ended"
    assert [e for e in errors if "permissions violation" in e.lower()] == []


async def test_no_reader_can_aim_a_jetstream_answer_where_spectators_listen(login, auth) -> None:
    """Issue 40: a spectator's JetStream read answered onto `spielbus.match.<any>.ended` (or any
    subject it named), heard by every other spectator on `spielbus.match.>`. Both read-only logins
    aim every read they have there; another spectator, listening, hears only the referee."""
    _, bundle = auth
    ref = await login(bundle.referee())
    js_ref = ref.jetstream()
    await ensure_streams(js_ref, S)
    await js_ref.publish(S.match("sro-aim", "ended"), b'{"n": 1}')
    heard: list[tuple[str, bytes]] = []

    async def keep(msg: Msg) -> None:
        heard.append((msg.subject, msg.data))

    listener = await login(bundle.spectator())
    await listener.subscribe(f"{S.prefix}.match.>", cb=keep)
    await flush(listener)
    api = spectator_api(S)
    stream = S.matches_stream
    reads = [
        (f"{api}.STREAM.MSG.GET.{stream}", {"seq": 1}),
        (f"{api}.STREAM.MSG.GET.{stream}", {"last_by_subj": S.match("sro-aim", "ended")}),
        (f"{api}.STREAM.INFO.{stream}", {}),
        (f"$JS.API.STREAM.MSG.GET.{stream}", {"seq": 1}),
        (f"$JS.API.STREAM.INFO.{stream}", {}),
    ]
    targets = [S.match("evil", "ended"), S.match("sro-aim", "ended"), f"{S.prefix}.match.evil.moved"]
    attackers = [await login(bundle.spectator())]
    if hasattr(bundle, "replay"):  # the stored events' reader (absent before issue 40)
        attackers.append(await login(bundle.replay()))
    for attacker in attackers:
        for subject, body in reads:
            for target in targets:
                await attacker.publish(subject, json.dumps(body).encode(), reply=target)
        await flush(attacker)
    # The reads are answered by JetStream on its own workers: the referee's marker, published
    # after them and heard, closes the window (plus a settle for the JetStream workers).
    for _ in range(20):
        await asyncio.sleep(0.05)
        await flush(listener)
    await ref.publish(S.match("sro-marker", "started"), b"{}")
    await flush(ref)
    for _ in range(200):
        if any(s == S.match("sro-marker", "started") for s, _ in heard):
            break
        await asyncio.sleep(0.01)
    assert [s for s, _ in heard] == [S.match("sro-marker", "started")], heard
