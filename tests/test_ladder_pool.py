"""The ladder's pool (referee/ladder/pool.py) against a real nats-server: agents join and leave,
names not in the ladder file are ignored, and under accounts an impostor cannot answer for
another agent's name while the real agent, with its own login, joins."""

from __future__ import annotations

from pathlib import Path

from agents.random_agent import RandomStrategy
from bus.auth import load_auth
from bus.connect import connect
from bus.server import EmbeddedNats
from referee.ladder.pool import Pool, probe
from tests.helpers import serving

AUTH_AGENTS = ["alice", "bob"]  # the logins of tests/conftest.py's auth_dir


async def test_join_and_leave(nats_url: str) -> None:
    nc = await connect(nats_url, name="ladder-pool")
    pool = Pool(["lp_alice", "lp_bob"])
    try:
        async with serving(nc, RandomStrategy.from_options({"seed": 1}), "lp_alice"):
            async with serving(nc, RandomStrategy.from_options({"seed": 2}), "lp_carol"):  # not listed
                joined, left = await pool.update(nc, wait_s=2)
                assert [m.name for m in joined] == ["lp_alice"] and left == []
                assert pool.members["lp_alice"].entry.startswith("lp_alice@")
            async with serving(nc, RandomStrategy.from_options({"seed": 3}), "lp_bob"):
                joined, left = await pool.update(nc, wait_s=2)
                assert [m.name for m in joined] == ["lp_bob"] and left == []
        joined, left = await pool.update(nc, wait_s=1)
        assert joined == [] and sorted(m.name for m in left) == ["lp_alice", "lp_bob"]
    finally:
        await nc.drain()


async def test_changed_provenance_is_a_new_entry(nats_url: str) -> None:
    nc = await connect(nats_url, name="ladder-pool-prov")
    try:
        async with serving(nc, RandomStrategy.from_options({"seed": 1}), "lp_dave"):
            first = (await probe(nc, ["lp_dave"]))["lp_dave"].entry
        async with serving(nc, RandomStrategy.from_options({"seed": 9}), "lp_dave"):
            second = (await probe(nc, ["lp_dave"]))["lp_dave"].entry
        assert first != second
    finally:
        await nc.drain()


async def test_impostor_refused_and_login_joins(auth_server: EmbeddedNats, auth_dir: Path) -> None:
    bundle = load_auth(auth_dir)
    r, a, b = bundle.referee(), bundle.agent("alice"), bundle.agent("bob")
    ref = await connect(auth_server.url, name="ladder", user=r.user, password=r.password)
    bob = await connect(auth_server.url, name="bob", user=b.user, password=b.password)
    alice = await connect(auth_server.url, name="alice", user=a.user, password=a.password)
    try:
        # bob's login serves under alice's name: the bus refuses it, alice stays absent.
        async with serving(bob, RandomStrategy.from_options({"seed": 1}), "alice"):
            assert await probe(ref, ["alice", "bob"], wait_s=1) == {}
        async with serving(alice, RandomStrategy.from_options({"seed": 2}), "alice"):
            assert list(await probe(ref, ["alice", "bob"], wait_s=2)) == ["alice"]
    finally:
        for nc in (ref, bob, alice):
            await nc.close()
