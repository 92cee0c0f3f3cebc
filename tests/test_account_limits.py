"""Every account `spielbus auth init` writes for a bot carries the operator's limits
(`bus.auth.AGENT_ACCOUNT_LIMITS`): one bot login can no longer open every connection the server
has (issue 41 measured 500 of 500). A real nats-server on the generated configuration."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
from nats.aio.client import Client as NATS

from bus.auth import AGENT_ACCOUNT_LIMITS, load_auth
from bus.server import EmbeddedNats

AUTH_AGENTS = ["greedy", "other"]  # tests/conftest.py's auth_dir


async def _login(url: str, user: str, password: str) -> NATS:
    async def quiet(exc: Exception) -> None:
        pass  # the refusal is what the test looks for

    return await nats.connect(
        url, user=user, password=password, allow_reconnect=False, max_reconnect_attempts=0, error_cb=quiet
    )


async def test_one_bot_login_cannot_open_more_than_its_accounts_connections(
    auth_server: EmbeddedNats, auth_dir: Path
) -> None:
    bundle = load_auth(auth_dir)
    greedy = next(u for u in bundle.users if u.role == "agent" and u.agent == "greedy")
    other = next(u for u in bundle.users if u.role == "agent" and u.agent == "other")
    cap = AGENT_ACCOUNT_LIMITS["max_connections"]
    held: list[NATS] = []
    try:
        for _ in range(cap):
            held.append(await _login(auth_server.url, greedy.user, greedy.password))
        with pytest.raises(Exception):  # noqa: B017 (nats-py's error for a refused login varies by version)
            held.append(await _login(auth_server.url, greedy.user, greedy.password))
        # The cap is the greedy account's own: another bot still gets in.
        nc = await _login(auth_server.url, other.user, other.password)
        assert nc.is_connected
        held.append(nc)
    finally:
        for nc in held:
            await nc.close()
