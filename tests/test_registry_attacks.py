"""The attacks of test_accounts_attacks.py again, with self-registered logins (bus/registry.py).

Same attacker (`mallory`: its bot login and its bot-check login, both from `spielbus ladder
register`), same victim, same spectator, on a nats-server in operator mode whose bot accounts were
added at run time: the turn-3 reply relay onto the JetStream API, fake turns and notifications to
another agent, and a spectator aiming its reads' answers. Each must change nothing, as with the
static accounts. The tests are imported from test_accounts_attacks.py and run with this module's
`auth` and `login` fixtures: each `AuthUser` here carries a creds file path as its password.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bus.auth import AuthBundle, AuthUser, botcheck_user
from bus.connect import connect
from bus.identity import account_of
from bus.registry import Registrar, RegistrationPolicy, init_registry
from bus.server import EmbeddedNats
from spielbus.register import _registrar_app, register
from tests.helpers import CREDS, quiet_logins
from tests.test_accounts_attacks import (  # noqa: F401  (collected here, with this module's fixtures)
    MALLORY,
    VICTIM,
    test_no_fake_turns_or_notifications_reach_another_agent,
    test_reply_relay_cannot_reach_the_jetstream_api,
    test_spectator_reads_cannot_aim_their_answers,
)


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[EmbeddedNats, Path, Path]]:
    folder = tmp_path_factory.mktemp("registry")
    bots = tmp_path_factory.mktemp("bots")
    init_registry(folder)
    with EmbeddedNats(config=folder / "nats-server.conf") as srv:
        yield srv, folder, bots


@pytest.fixture(scope="module")
async def auth(registry: tuple[EmbeddedNats, Path, Path]) -> AsyncIterator[tuple[EmbeddedNats, AuthBundle]]:
    srv, folder, bots = registry
    system = await connect(srv.url, name="test-system", creds=str(folder / "system.creds"))
    runner = web.AppRunner(_registrar_app(Registrar(folder, RegistrationPolicy(policy="open"), system)))
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    for name in (MALLORY, VICTIM):
        assert await asyncio.to_thread(register, name, url, bots) == 0
    await runner.cleanup()
    await system.close()

    def user(role: Any, creds: Path, agent: str | None = None) -> AuthUser:
        return AuthUser(role=role, user=CREDS, password=str(creds), agent=agent)

    users = [
        user("referee", folder / "referee.creds"),
        user("spectator", folder / "spectator.creds"),
        user("replay", folder / "replay.creds"),
        *(user("agent", bots / f"{n}.creds", n) for n in (MALLORY, VICTIM)),
        *(user("botcheck", bots / f"{n}-botcheck.creds", n) for n in (MALLORY, VICTIM)),
    ]
    yield srv, AuthBundle(users=users)


@pytest.fixture
async def login(auth: tuple[EmbeddedNats, AuthBundle]) -> AsyncIterator[Any]:
    async with quiet_logins(auth[0].url) as make:
        yield make


def test_the_registered_accounts_are_the_identities(auth: tuple[EmbeddedNats, AuthBundle]) -> None:
    """The bot's user JWT names its account `agent-<name>` (bus/identity.py), its checker's
    `botcheck-<name>`: what the ladder keys quarantine and pacing on."""
    from bus import nats_jwt as J

    _, bundle = auth
    for role, want in (("agent", account_of(MALLORY)), ("botcheck", botcheck_user(MALLORY))):
        creds = Path(next(u.password for u in bundle.users if u.role == role and u.agent == MALLORY))
        jwt = creds.read_text().split("-----BEGIN NATS USER JWT-----\n")[1].split("\n")[0]
        assert J.decode(jwt)["name"] == want
