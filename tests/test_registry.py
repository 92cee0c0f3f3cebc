"""Self-registered bots (bus/registry.py, spielbus/register.py) on a real nats-server in operator mode.

A registry folder (`spielbus auth init --registry`), the nats-server it configures, the registrar
serving HTTP (in this process, and once as `spielbus ladder registrar`), and bot authors running
`spielbus ladder register`: bots register, play on the ladder, are revoked (cut off, and refused
when they come back), are held to their account's connection limit, and are admitted by the
ladder file's policy (open, invite, approval). The attacks of test_accounts_attacks.py are run
again with registered logins in test_registry_attacks.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import nats
import nats.errors
import pytest
from aiohttp import web
from nats.aio.client import Client as NATS
from nats.aio.msg import Msg

from agents.random_agent import RandomStrategy
from bus import nats_jwt as J
from bus.connect import connect
from bus.registry import (
    BotLimits,
    Registrar,
    RegistrationPolicy,
    change_status,
    init_registry,
    load_registry,
    registered_names,
)
from bus.server import EmbeddedNats
from bus.subjects import LADDER_BUCKET, Subjects
from referee.ladder.service import Ladder
from spielbus.register import EXIT_PENDING, _post, _registrar_app, register
from tests.helpers import serving, uid, until
from tests.test_ladder_service import _config, _names, referee, running

ROOT = Path(__file__).resolve().parents[1]
S = Subjects()
OPEN = RegistrationPolicy(policy="open")


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("registry")
    init_registry(out)
    return out


@pytest.fixture(scope="module")
def server(folder: Path) -> Iterator[EmbeddedNats]:
    with EmbeddedNats(config=folder / "nats-server.conf") as srv:
        yield srv


@pytest.fixture
async def system(server: EmbeddedNats, folder: Path) -> AsyncIterator[NATS]:
    nc = await connect(server.url, name="test-system", creds=str(folder / "system.creds"))
    yield nc
    await nc.close()


@contextlib.asynccontextmanager
async def registrar_at(folder: Path, policy: RegistrationPolicy, nc: NATS) -> AsyncIterator[str]:
    """The registrar's HTTP app on a free port; yields its URL."""
    runner = web.AppRunner(_registrar_app(Registrar(folder, policy, nc)))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def sign_up(url: str, name: str, out: Path, invite: str | None = None) -> int:
    """What a bot author runs (`spielbus ladder register`), off the event loop serving the registrar."""
    return await asyncio.to_thread(register, name, url, out, invite)


async def as_bot(server: EmbeddedNats, out: Path, name: str) -> NATS:
    return await connect(server.url, name=f"bot-{name}", creds=str(out / f"{name}.creds"))


async def refused(server: EmbeddedNats, creds: Path) -> str:
    """The server's refusal of a login (fails the test if it is let in)."""
    try:
        nc = await nats.connect(
            server.url, user_credentials=str(creds), allow_reconnect=False, connect_timeout=5
        )
    except Exception as exc:  # nats-py raises its own errors for a refused login
        return str(exc)
    await nc.close()
    raise AssertionError(f"{creds} was let in")


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "spielbus.cli", *argv], capture_output=True, text=True, env=env, timeout=120
    )


async def test_registered_bots_play_on_the_ladder_and_a_revoked_one_is_cut_off(
    server: EmbeddedNats, folder: Path, system: NATS, tmp_path: Path
) -> None:
    alice, bob = uid("alice"), uid("bob")
    async with registrar_at(folder, OPEN, system) as url:
        assert await sign_up(url, alice, tmp_path) == 0
        assert await sign_up(url, bob, tmp_path) == 0
    assert {alice, bob} <= set(registered_names(folder))
    env = (tmp_path / f"{alice}.env").read_text()
    assert f"NATS_CREDS={tmp_path / (alice + '.creds')}" in env and "SPIELBUS_BOTCHECK_CREDS=" in env
    # The registry holds public keys only: the seeds stayed with the author.
    seeds = (tmp_path / f"{alice}.seeds").read_text()
    assert seeds.split('"user": "')[1][:56] not in (folder / "registry.json").read_text()
    ref = await connect(server.url, name="test-referee", creds=str(folder / "referee.creds"))
    a_nc, b_nc = await as_bot(server, tmp_path, alice), await as_bot(server, tmp_path, bob)
    cfg = _config([], registration=OPEN.model_dump(), bucket=LADDER_BUCKET)  # the referee login's only bucket
    try:
        async with (
            referee(ref),
            serving(a_nc, RandomStrategy.from_options({"seed": 1}), alice),
            serving(b_nc, RandomStrategy.from_options({"seed": 2}), bob),
        ):
            ladder = Ladder(ref, cfg, registered=lambda: registered_names(folder))
            async with running(ref, ladder):
                await until(lambda: {alice, bob} <= _names(ladder), "both registered bots played", 120)
                revoked = _cli("ladder", "revoke", alice, "--auth", str(folder), "--nats", server.url)
                assert revoked.returncode == 0, revoked.stderr
                await until(lambda: not a_nc.is_connected, "alice's connection closed by the server", 30)
                await until(lambda: alice not in ladder.pool.members, "alice left the pool", 30)
                with pytest.raises(nats.errors.NoRespondersError):
                    await ref.request(S.turn(alice), b"{}", timeout=2)
        assert "authorization violation" in (await refused(server, tmp_path / f"{alice}.creds")).lower()
        assert load_registry(folder).bots[alice].status == "revoked"
        assert alice not in registered_names(folder) and bob in registered_names(folder)
    finally:
        for nc in (a_nc, b_nc, ref):
            await nc.close()


async def test_a_login_beyond_its_connection_limit_is_refused(
    server: EmbeddedNats, folder: Path, system: NATS, tmp_path: Path
) -> None:
    carol = uid("carol")
    limit = BotLimits().conn
    async with registrar_at(folder, OPEN, system) as url:
        assert await sign_up(url, carol, tmp_path) == 0
    opened = [await as_bot(server, tmp_path, carol) for _ in range(limit)]
    try:
        assert "connections" in (await refused(server, tmp_path / f"{carol}.creds")).lower()
    finally:
        for nc in opened:
            await nc.close()


async def test_invite_codes_admit_one_bot_each(folder: Path, system: NATS, tmp_path: Path) -> None:
    code = uid("code")
    policy = RegistrationPolicy(policy="invite", invites=[code])
    async with registrar_at(folder, policy, system) as url:
        assert await sign_up(url, uid("nocode"), tmp_path) == 2
        assert await sign_up(url, uid("badcode"), tmp_path, invite="guess") == 2
        dave = uid("dave")
        assert await sign_up(url, dave, tmp_path, invite=code) == 0
        assert await sign_up(url, dave, tmp_path, invite=code) == 0  # the same bot again: its logins
        assert await sign_up(url, uid("eve"), tmp_path, invite=code) == 2  # used
        assert not (tmp_path / "guess.creds").exists()


async def test_approval_policy_waits_for_the_operator(
    server: EmbeddedNats, folder: Path, system: NATS, tmp_path: Path
) -> None:
    frank = uid("frank")
    async with registrar_at(folder, RegistrationPolicy(policy="approval"), system) as url:
        assert await sign_up(url, frank, tmp_path) == EXIT_PENDING
        assert not (tmp_path / f"{frank}.creds").exists()
        assert frank not in registered_names(folder)
        await change_status(folder, frank, "active", system)
        assert await sign_up(url, frank, tmp_path) == 0
    nc = await as_bot(server, tmp_path, frank)
    await nc.close()


async def test_a_taken_name_is_refused_to_another_key(folder: Path, system: NATS, tmp_path: Path) -> None:
    name = uid("gina")
    async with registrar_at(folder, OPEN, system) as url:
        assert await sign_up(url, name, tmp_path / "first") == 0
        assert await sign_up(url, name, tmp_path / "second") == 2
        # A bad name: the client says so before asking; the registrar refuses it too.
        with pytest.raises(ValueError, match="agent name"):
            await sign_up(url, "no.dots", tmp_path)
        key = J.public_key(J.new_key("user"))
        status, body = await asyncio.to_thread(_post, url, {"name": "a.>", "user": key, "checker": key}, None)
        assert status == 400 and "agent name" in str(body["error"])
        status, body = await asyncio.to_thread(
            _post, url, {"name": uid("x"), "user": "UAAA", "checker": key}, None
        )
        assert status == 400 and "public key" in str(body["error"])


def test_the_registrar_command_serves_registration(
    server: EmbeddedNats, folder: Path, tmp_path: Path
) -> None:
    """`spielbus ladder registrar FILE --auth DIR` as a process, `spielbus ladder register` against it."""
    from bus.process import free_port

    port = free_port()
    ladder = tmp_path / "ladder.toml"
    ladder.write_text('name = "open"\n[[games]]\nname = "tic_tac_toe"\n[registration]\npolicy = "open"\n')
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [
        "ladder",
        "registrar",
        str(ladder),
        "--auth",
        str(folder),
        "--nats",
        server.url,
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "spielbus.cli", *argv], stdout=subprocess.PIPE, text=True, env=env
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "registrar of open (open)" in line, line
        name = uid("hal")
        done = _cli(
            "ladder", "register", name, "--ladder", f"http://127.0.0.1:{port}", "--out", str(tmp_path)
        )
        assert done.returncode == 0, done.stderr
        assert (tmp_path / f"{name}.env").exists()
        listed = _cli("ladder", "bots", "--auth", str(folder))
        assert f"{name}\tactive" in listed.stdout
    finally:
        proc.terminate()
        proc.wait(30)


def test_auth_init_takes_a_ladder_file(tmp_path: Path) -> None:
    """Issue 41: `spielbus auth init examples/ladder.toml` was refused (exit 2)."""
    done = _cli("auth", "init", str(ROOT / "examples" / "ladder.toml"), "--out", str(tmp_path / "a"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "a" / "agents" / "node_bot.env").exists()


async def test_bot_check_with_the_registered_login_file(
    server: EmbeddedNats, folder: Path, system: NATS, tmp_path: Path
) -> None:
    """The one login file of `spielbus ladder register` serves the bot and `bot-check --login`."""
    from referee.botcheck import BotCheckOptions, check_bot, login_from_file

    ivy = uid("ivy")
    async with registrar_at(folder, OPEN, system) as url:
        assert await sign_up(url, ivy, tmp_path) == 0
    login, _ = login_from_file(tmp_path / f"{ivy}.env")
    assert login.get("creds") and login.get("inbox_prefix")
    bot = await as_bot(server, tmp_path, ivy)
    try:
        async with serving(bot, RandomStrategy.from_options({"seed": 1}), ivy):
            options = BotCheckOptions(games=["tic_tac_toe"], concurrency=2)
            report = await check_bot(ivy, server.url, options=options, login=login)
        assert all(r.ok for r in report.results), [r for r in report.results if not r.ok]
    finally:
        await bot.close()


async def test_referee_and_ladder_commands_log_in_with_the_registry_folder(
    server: EmbeddedNats, folder: Path, tmp_path: Path
) -> None:
    """`spielbus referee --auth REG` and `spielbus ladder FILE --auth REG` use the referee's creds."""
    ladder = tmp_path / "ladder.toml"
    ladder.write_text(
        'name = "reg"\nprobe_s = 0.5\n[[games]]\nname = "tic_tac_toe"\n[registration]\npolicy = "open"\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NATS_")}
    env["PYTHONPATH"] = str(ROOT)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "spielbus.cli", *argv, "--auth", str(folder), "--nats", server.url],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        for argv in (["referee"], ["ladder", str(ladder)])
    ]
    ref = await connect(server.url, name="test-referee", creds=str(folder / "referee.creds"))
    try:

        async def referee_answers() -> bool:
            try:
                await ref.request("$SRV.PING.spielbus-referee", b"", timeout=1)
            except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                return False
            return True

        await until(referee_answers, "the referee process serves under the registry's referee login", 60)
        out = procs[1].stdout
        assert out is not None
        line = await asyncio.to_thread(out.readline)
        assert line.startswith("ladder reg on "), line
    finally:
        await ref.close()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            assert proc.wait(60) == 0, proc.stdout.read() if proc.stdout else ""


async def test_the_operators_subscription_and_payload_limits_hold(tmp_path: Path) -> None:
    """`[registration.limits]` on a ladder of its own: a 4th subscription and a 4 KB message are
    refused by the server (it closes the connection), as the operator set."""
    folder, bots = tmp_path / "reg", tmp_path / "bots"
    init_registry(folder)
    policy = RegistrationPolicy(policy="open", limits=BotLimits(conn=2, subs=3, payload=2048))
    with EmbeddedNats(config=folder / "nats-server.conf") as srv:
        system = await connect(srv.url, name="test-system", creds=str(folder / "system.creds"))
        name = uid("lim")
        try:
            async with registrar_at(folder, policy, system) as url:
                assert await sign_up(url, name, bots) == 0
        finally:
            await system.close()
        creds = str(bots / f"{name}.creds")
        subs = await nats.connect(srv.url, user_credentials=creds, allow_reconnect=False)
        for _ in range(4):
            await subs.subscribe(S.notify(name))
        await until(lambda: subs.is_closed, "the 4th subscription refused", 30)
        assert "maximum subscriptions exceeded" in str(subs.last_error).lower()
        big = await nats.connect(srv.url, user_credentials=creds, allow_reconnect=False)
        with contextlib.suppress(Exception):  # the server closes the connection at once
            await big.publish(S.notify(name), b"x" * 4096)
            await big.flush(timeout=5)
        await until(lambda: big.is_closed, "the 4 KB message refused", 30)
        assert "maximum payload" in str(big.last_error).lower()


async def test_registrations_at_once_all_reach_the_referee(
    server: EmbeddedNats, folder: Path, system: NATS, tmp_path: Path
) -> None:
    """Six authors register at the same moment: every bot's imports end up in the referee account
    (each registration re-issues it: one pushed late must not drop another's)."""
    names = [uid("rush") for _ in range(6)]
    async with registrar_at(folder, OPEN, system) as url:
        codes = await asyncio.gather(*(sign_up(url, n, tmp_path) for n in names))
    assert codes == [0] * len(names)
    ref = await connect(server.url, name="test-referee", creds=str(folder / "referee.creds"))
    bots = [await as_bot(server, tmp_path, n) for n in names]
    try:
        for n, nc in zip(names, bots, strict=True):

            async def info(msg: Msg) -> None:
                await msg.respond(b"{}")

            await nc.subscribe(f"$SRV.INFO.{n}", cb=info)
            await nc.flush()
        reached = []
        for n in names:
            with contextlib.suppress(nats.errors.NoRespondersError, nats.errors.TimeoutError):
                await ref.request(f"$SRV.INFO.{n}", b"", timeout=2)
                reached.append(n)
        assert reached == names
    finally:
        for nc in [*bots, ref]:
            await nc.close()
