"""Accounts and permissions: with `spielbus auth init`'s config, nobody may see or do what is not theirs.

A real nats-server runs the generated config. Every refusal must also be reported to the
offending client (its error callback), not only dropped silently by the server.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg
from nats.js.api import RawStreamMsg

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from agents.runtime import AgentService
from bus.auth import (
    AuthBundle,
    AuthError,
    AuthUser,
    config_path,
    load_auth,
    spectator_api,
    write_auth,
)
from bus.connect import connect, flush
from bus.follow import follow_stream
from bus.protocol import Move
from bus.server import EmbeddedNats
from bus.streams import ensure_streams
from bus.subjects import REFEREE_SERVICE, Subjects
from referee.config import ConfigError, parse_config
from referee.ladder.config import parse_ladder
from tests.helpers import serving, spec

ROOT = Path(__file__).resolve().parents[1]
S = Subjects()


class Login:
    """A connection as one user, with every asynchronous error the server reported."""

    def __init__(self, nc: NATS, errors: list[str]) -> None:
        self.nc = nc
        self.errors = errors

    def violations(self) -> list[str]:
        return [e for e in self.errors if "permissions violation" in e.lower()]


@pytest.fixture
async def login(auth_server: EmbeddedNats) -> AsyncIterator[object]:
    opened: list[NATS] = []

    async def make(user: AuthUser, **kw: object) -> Login:
        errors: list[str] = []

        async def on_error(exc: Exception) -> None:
            errors.append(str(exc))

        nc = await nats.connect(
            auth_server.url, user=user.user, password=user.password, error_cb=on_error, **kw
        )
        opened.append(nc)
        return Login(nc, errors)

    yield make
    for nc in opened:
        await nc.close()


async def _reported(who: Login, fragment: str) -> None:
    """Wait until the server's `-ERR` for a refused operation has reached the client."""
    for _ in range(200):
        await flush(who.nc)
        if any(fragment.lower() in v.lower() for v in who.violations()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"no permission violation mentioning {fragment!r}; errors: {who.errors}")


def test_auth_init_writes_private_files(auth_dir: Path, bundle: AuthBundle) -> None:
    conf = config_path(auth_dir).read_text()
    assert "$JS.API.>" not in conf
    assert "allow_responses" in conf
    for path in [config_path(auth_dir), auth_dir / "auth.json", auth_dir / "agents" / "alice.env"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    env = (auth_dir / "agents" / "alice.env").read_text()
    assert f"NATS_USER={bundle.agent('alice').user}" in env
    assert f"NATS_PASSWORD={bundle.agent('alice').password}" in env
    assert len({u.password for u in bundle.users}) == len(bundle.users)
    with pytest.raises(AuthError, match="--force"):
        write_auth(["alice"], auth_dir)
    with pytest.raises(AuthError, match="carol"):
        bundle.agent("carol")


def test_auth_init_cli_from_a_tournament_file(tmp_path: Path) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text(
        '[[games]]\nname = "tic_tac_toe"\n[agents.r1]\nkind = "random"\n[agents.r2]\nkind = "random"\n'
    )
    out = tmp_path / "auth"
    cli = [sys.executable, "-m", "spielbus.cli", "auth", "init"]
    res = subprocess.run(
        [*cli, str(toml), "--agents", "extra", "--out", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert res.returncode == 0, res.stderr
    assert {u.agent for u in load_auth(out).users if u.role == "agent"} == {"r1", "r2", "extra"}
    again = subprocess.run(
        [*cli, "--agents", "x", "--out", str(out)], capture_output=True, text=True, cwd=ROOT
    )
    assert again.returncode == 2 and "--force" in again.stdout
    bad = subprocess.run(
        [*cli, "--agents", "no.dots", "--out", str(tmp_path / "b")], capture_output=True, text=True, cwd=ROOT
    )
    assert bad.returncode == 2


async def test_anonymous_and_wrong_password_are_refused(
    auth_server: EmbeddedNats, bundle: AuthBundle
) -> None:
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await nats.connect(auth_server.url, max_reconnect_attempts=0, allow_reconnect=False)
    with pytest.raises(Exception, match=r"(?i)authorization"):
        await nats.connect(
            auth_server.url,
            user=bundle.agent("alice").user,
            password="wrong",
            max_reconnect_attempts=0,
            allow_reconnect=False,
        )


async def test_agent_cannot_subscribe_to_another_agents_turns(login, bundle: AuthBundle) -> None:
    ref = await login(bundle.referee())
    alice = await login(bundle.agent("alice"))
    bob = await login(bundle.agent("bob"))
    stolen: list[Msg] = []

    async def steal(msg: Msg) -> None:
        stolen.append(msg)

    await alice.nc.subscribe(S.turn("bob"), queue="bob", cb=steal)
    await alice.nc.subscribe(S.turn("bob"), cb=steal)
    await alice.nc.subscribe("spielbus.turn.*", cb=steal)
    # Allowed (the provider limiter's answers land there), but it is alice's own account's inbox:
    # neither the referee's answers nor bob's turns can be heard in it (`stolen` stays empty).
    await alice.nc.subscribe("_INBOX.>", cb=steal)
    await _reported(alice, 'subscription to "spielbus.turn.bob"')

    async def answer(msg: Msg) -> None:
        await msg.respond(b"bob's answer")

    await bob.nc.subscribe(S.turn("bob"), queue="bob", cb=answer)
    await flush(bob.nc)
    for _ in range(5):
        reply = await ref.nc.request(S.turn("bob"), b"a turn for bob", timeout=2)
        assert reply.data == b"bob's answer"
    await flush(alice.nc)
    assert stolen == []
    assert bob.violations() == []


async def test_agent_cannot_answer_a_turn_meant_for_another(login, bundle: AuthBundle) -> None:
    """Even knowing the referee's reply subject, alice cannot slip in a move for bob."""
    ref = await login(bundle.referee())
    alice = await login(bundle.agent("alice"))
    bob = await login(bundle.agent("bob"))
    received: list[bytes] = []
    got = asyncio.Event()
    inbox = ref.nc.new_inbox()

    async def on_reply(msg: Msg) -> None:
        received.append(msg.data)
        got.set()

    await ref.nc.subscribe(inbox, cb=on_reply)
    release = asyncio.Event()
    asked = asyncio.Event()

    async def slow_bob(msg: Msg) -> None:
        asked.set()
        await release.wait()
        await msg.respond(b'{"from": "bob"}')

    await bob.nc.subscribe(S.turn("bob"), queue="bob", cb=slow_bob)
    await flush(bob.nc)
    await flush(ref.nc)
    await ref.nc.publish(S.turn("bob"), b"turn", reply=inbox)
    await asked.wait()
    fake = Move(match_id="m", turn=1, action=0).model_dump_json().encode()
    await alice.nc.publish(inbox, fake)
    await alice.nc.publish(S.turn("bob"), b"a fake turn")
    await _reported(alice, inbox)
    await _reported(alice, 'publish to "spielbus.turn.bob"')
    release.set()
    await got.wait()
    await flush(ref.nc)
    assert received == [b'{"from": "bob"}']


async def test_agent_cannot_publish_match_events_or_specs(login, bundle: AuthBundle) -> None:
    ref = await login(bundle.referee())
    spectator = await login(bundle.spectator())
    alice = await login(bundle.agent("alice"))
    seen: list[str] = []

    async def watch(msg: Msg) -> None:
        seen.append(msg.subject)

    await spectator.nc.subscribe("spielbus.match.>", cb=watch)
    await flush(spectator.nc)
    await alice.nc.publish(S.match("m1", "ended"), b'{"forged": true}')
    await alice.nc.publish(S.schedule, b'{"forged": true}')
    await alice.nc.publish(S.notify("bob"), b'{"forged": true}')
    await _reported(alice, "spielbus.match.m1.ended")
    await _reported(alice, "spielbus.schedule")
    await _reported(alice, "spielbus.notify.bob")
    # The spectator can read match events, only the referee's arrive, and it may not write any.
    await ref.nc.publish(S.match("m2", "started"), b"{}")
    await flush(ref.nc)
    await spectator.nc.publish(S.match("m3", "started"), b"{}")
    await _reported(spectator, "spielbus.match.m3.started")
    await flush(spectator.nc)
    assert seen == [S.match("m2", "started")]


async def test_bot_check_user_asks_only_its_own_bot_and_forges_nothing(login, bundle: AuthBundle) -> None:
    """`botcheck-alice` (what alice's author runs bot-check with) is no referee: it may ask alice
    and notify alice, and nothing else: no match events, no specs, no other agent, no `_INBOX.>`."""
    spectator = await login(bundle.spectator())
    alice = await login(bundle.agent("alice"))
    checker_user = bundle.botcheck("alice")
    checker = await login(checker_user, inbox_prefix=checker_user.inbox_prefix())
    seen: list[str] = []

    async def watch(msg: Msg) -> None:
        seen.append(msg.subject)

    async def answer(msg: Msg) -> None:
        await msg.respond(b'{"ok": true}')

    await spectator.nc.subscribe("spielbus.match.>", cb=watch)
    await flush(spectator.nc)
    await alice.nc.subscribe(S.turn("alice"), queue="alice", cb=answer)
    await flush(alice.nc)
    reply = await checker.nc.request(S.turn("alice"), b"{}", timeout=5)
    assert reply.data == b'{"ok": true}'
    await checker.nc.publish(S.match("m9", "ended"), b'{"forged": true}')
    await _reported(checker, "spielbus.match.m9.ended")
    await checker.nc.publish(S.schedule, b'{"forged": true}')
    await _reported(checker, "spielbus.schedule")
    await checker.nc.publish(S.turn("bob"), b"{}")
    await _reported(checker, "spielbus.turn.bob")
    await checker.nc.publish(S.notify("bob"), b"{}")
    await _reported(checker, "spielbus.notify.bob")
    await checker.nc.subscribe("_INBOX.>")
    await _reported(checker, "_INBOX.>")
    await checker.nc.publish(f"$JS.API.STREAM.INFO.{S.matches_stream}", b"")
    await _reported(checker, "$JS.API.STREAM.INFO")
    await flush(spectator.nc)
    assert seen == []


async def test_nobody_but_the_referee_touches_streams_and_nobody_deletes_them(
    login, bundle: AuthBundle
) -> None:
    ref = await login(bundle.referee())
    await ensure_streams(ref.nc.jetstream(), S)
    for user in (bundle.agent("alice"), bundle.spectator(), bundle.referee()):
        who = await login(user)
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await who.nc.jetstream(timeout=0.5).delete_stream(S.matches_stream)
        await _reported(who, f"$js.api.stream.delete.{S.matches_stream}")
        with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
            await who.nc.jetstream(timeout=0.5).purge_stream(S.schedule_stream)
        await _reported(who, f"$js.api.stream.purge.{S.schedule_stream}")
    alice = await login(bundle.agent("alice"))
    with pytest.raises((nats.errors.TimeoutError, nats.errors.NoRespondersError)):
        await alice.nc.jetstream(timeout=0.5).stream_info(S.matches_stream)
    info = await ref.nc.jetstream().stream_info(S.matches_stream)
    assert info.config.name == S.matches_stream


async def test_spectator_replays_match_events_from_the_stream(login, bundle: AuthBundle) -> None:
    ref = await login(bundle.referee())
    js_ref = ref.nc.jetstream()
    await ensure_streams(js_ref, S)
    await js_ref.publish(S.match("replayed", "ended"), b'{"n": 1}')
    spectator = await login(bundle.spectator())
    reader = await login(bundle.replay(), inbox_prefix=bundle.replay().inbox_prefix())
    got = asyncio.Event()
    data: list[bytes] = []

    async def on(msg: RawStreamMsg) -> None:
        assert msg.data is not None
        data.append(msg.data)
        got.set()

    # Read-only: stored messages one by one, no consumer (see tests/test_spectator_readonly.py).
    follower = await follow_stream(
        spectator.nc,
        S.matches_stream,
        S.match("replayed", "ended"),
        on,
        api_prefix=spectator_api(S),
        reads=reader.nc,
    )
    await asyncio.wait_for(got.wait(), timeout=10)
    await follower.unsubscribe()
    assert data[0] == b'{"n": 1}'
    assert spectator.violations() == [] and reader.violations() == []


async def test_a_violation_is_logged_by_our_connection_helper(
    auth_server: EmbeddedNats, bundle: AuthBundle, caplog: pytest.LogCaptureFixture
) -> None:
    alice = bundle.agent("alice")
    nc = await connect(auth_server.url, name="alice", user=alice.user, password=alice.password)
    try:
        with caplog.at_level(logging.WARNING, logger="bus.connect"):
            await nc.subscribe(S.turn("bob"))
            for _ in range(200):
                await flush(nc)
                if "permissions violation" in caplog.text.lower():
                    break
                await asyncio.sleep(0.01)
        assert 'permissions violation for subscription to "spielbus.turn.bob"' in caplog.text.lower()
    finally:
        await nc.close()


async def test_agent_runtime_and_referee_play_under_auth(
    auth_server: EmbeddedNats, bundle: AuthBundle
) -> None:
    """The real agent runtime (nats.micro discovery included) and referee work with the narrow rights."""
    from referee.worker import RefereeWorker
    from spielbus.launch import agent_present

    logins = {}
    for name in ("alice", "bob"):
        u = bundle.agent(name)
        logins[name] = await connect(auth_server.url, name=name, user=u.user, password=u.password)
    r = bundle.referee()
    ref = await connect(auth_server.url, name="referee", user=r.user, password=r.password)
    try:
        async with (
            serving(logins["alice"], RandomStrategy.from_options({"seed": 1}), "alice"),
            serving(logins["bob"], RandomStrategy.from_options({"seed": 2}), "bob"),
        ):
            assert await agent_present(ref, "alice", wait_s=2) and await agent_present(ref, "bob", wait_s=2)
            info = json.loads((await ref.request("$SRV.INFO.alice", b"", timeout=2)).data)
            assert info["metadata"]["kind"] == "random"
            worker = RefereeWorker(ref)
            for game in ("tic_tac_toe", "leduc_poker"):
                rec = await worker.play(spec(game, ["alice", "bob"]))
                assert rec.faults == [] and rec.outcome in ("decisive", "draw"), rec
    finally:
        for nc in [*logins.values(), ref]:
            await nc.close()


@pytest.mark.slow
def test_spielbus_run_with_auth(tmp_path: Path) -> None:
    """`spielbus run --auth`: embedded server with the config, children log in with their own users."""
    toml = tmp_path / "t.toml"
    toml.write_text(
        'name = "authrun"\ngames_per_pairing = 1\ndeadline_ms = 5000\n'
        '[[games]]\nname = "tic_tac_toe"\n[agents.r1]\nkind = "random"\n[agents.r2]\nkind = "random"\n'
    )
    write_auth(["r1", "r2"], tmp_path / "auth")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    cli = [
        sys.executable,
        "-m",
        "spielbus.cli",
        "run",
        str(toml),
        "--quiet",
        "--run-dir",
        str(tmp_path / "runs"),
    ]
    res = subprocess.run(
        [*cli, "--auth", str(tmp_path / "auth")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    (folder,) = (tmp_path / "runs").iterdir()
    records = [json.loads(x) for x in (folder / "matches.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["faults"] == [] for r in records)
    log = (folder / "nats-server.log").read_text()
    # nats-server logs "Publish Violation" / "Subscription Violation" for a refused permission.
    assert "violation" not in log.lower()
    # An agent missing from the auth folder is a usage error before anything starts.
    write_auth(["r1"], tmp_path / "auth1")
    res = subprocess.run(
        [*cli, "--auth", str(tmp_path / "auth1")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=60,
    )
    assert res.returncode == 2 and "r2" in res.stdout


def test_if_missing_rewrites_a_shared_account_config_as_accounts_keeping_passwords(tmp_path: Path) -> None:
    """A folder written before accounts (one shared `authorization` block): `auth init --if-missing`
    (what the compose stack runs on every `up`) rewrites its server configuration as accounts and
    keeps every password, so running bots keep logging in."""
    from bus.auth import ensure_auth, render_config

    write_auth(["alice"], tmp_path)
    before = load_auth(tmp_path)
    config_path(tmp_path).write_text('{"authorization": {"users": []}}\n')
    bundle, written = ensure_auth(["alice"], tmp_path)
    assert written and bundle == before
    text = config_path(tmp_path).read_text()
    assert text == render_config(before) and '"accounts"' in text and "authorization" not in text
    assert ensure_auth(["alice"], tmp_path) == (before, False)


async def test_no_agent_may_take_the_referee_service_name(tmp_path: Path, nc: NATS) -> None:
    """An agent named `spielbus-referee` would be allowed `$SRV.*.spielbus-referee` under accounts
    and so answer discovery for every referee worker; each door that names an agent refuses it."""
    with pytest.raises(ValueError, match="reserved"):
        write_auth(["honest", REFEREE_SERVICE], tmp_path / "auth")
    assert not (tmp_path / "auth").exists()
    toml = (
        f'[[games]]\nname = "tic_tac_toe"\n[agents.{REFEREE_SERVICE}]\nkind = "random"\n'
        '[agents.b]\nkind = "random"\n'
    )
    with pytest.raises(ConfigError, match="reserved"):
        parse_config(toml)
    with pytest.raises(ConfigError, match="reserved"):
        parse_ladder(f'name = "l"\n[[games]]\nname = "tic_tac_toe"\n[agents.{REFEREE_SERVICE}]\n[agents.b]\n')
    with pytest.raises(ValueError, match="reserved"):
        AgentService(nc, RandomStrategy(StrategyOptions(seed=1)), name=REFEREE_SERVICE)
