"""bus.connect and bus.streams: server lists, reconnecting without limit, stream replication.

Against real nats-servers: a client outlives an outage far longer than the old three
attempts allowed, a list with a dead server in front still connects, and replicas above 1
on a single server fail with a message that says why. The cluster itself is in test_cluster.py.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import json
import logging
import random
import subprocess
import sys
import urllib.request
from typing import Any
from urllib.parse import urlparse, urlsplit

import pytest
from nats.aio.client import Client as NATS
from nats.aio.client import Server
from nats.aio.msg import Msg

from bus.connect import (
    RECONNECT_MAX_WAIT_S,
    NatsURLError,
    ReconnectPolicy,
    connect,
    flush,
    nats_servers,
    redact,
)
from bus.process import free_port
from bus.server import EmbeddedNats
from bus.streams import StreamError, ensure_streams, set_stream_replicas, stream_replicas
from bus.subjects import Subjects
from tests.helpers import uid


def test_server_lists_are_split_completed_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert nats_servers("nats://a:4222, b:5222 ,tls://c") == [
        "nats://a:4222",
        "nats://b:5222",
        "tls://c:4222",
    ]
    monkeypatch.setenv("NATS_URL", "nats://x:1,nats://y:2")
    assert nats_servers(None) == ["nats://x:1", "nats://y:2"]
    for bad, why in [
        ("http://a:4222", "scheme"),
        ("nats://a:4222,,nats://:5", "no host"),
        (" , ", "no server"),
        ("nats://a:4222/x", "no path"),
        ("nats://a:99999", "bad server URL"),
        ("nats://a:1,ws://b:2", "mix"),
    ]:
        with pytest.raises(NatsURLError, match=why):
            nats_servers(bad, source="--nats")


def test_passwords_in_urls_never_reach_a_message() -> None:
    assert redact("nats://u:secret@a:4222,nats://b:1") == "nats://u:***@a:4222,nats://b:1"
    with pytest.raises(NatsURLError) as err:
        nats_servers("nats://u:secret@a:4222,http://v:hidden@b:1")
    assert "secret" not in str(err.value) and "hidden" not in str(err.value)


def test_reconnect_policy_tries_the_least_failed_server_and_backs_off() -> None:
    policy = ReconnectPolicy(random.Random(1))
    a, b, c = (
        Server(uri=urlparse(f"nats://{h}:4222"), reconnects=n) for h, n in (("a", 2), ("b", 1), ("c", 1))
    )
    picks = {policy([a, b, c], {})[0].uri.hostname for _ in range(50)}  # type: ignore[union-attr]  # servers given: never None
    assert picks == {"b", "c"}  # never the server that failed most, and both of the others
    assert policy([Server(uri=urlparse("nats://a:1"), reconnects=0)], {})[1] == 0.0
    delays = [policy.delay(n) for n in range(1, 12)]
    assert all(0 < d <= RECONNECT_MAX_WAIT_S for d in delays)
    assert delays[-1] > delays[0] * 4  # it does grow


def test_cli_refuses_bad_urls_and_replica_counts_with_exit_2() -> None:
    for args in (
        ["referee", "--nats", "http://x:1"],
        ["referee", "--stream-replicas", "0"],
        ["submit", "f.toml", "--stream-replicas", "seven"],
        ["bot-check", "b", "--nats", ","],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "spielbus.cli", *args], capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 2, (args, out.stderr)
        assert "--nats" in out.stderr or "--stream-replicas" in out.stderr
    out = subprocess.run(
        [sys.executable, "-m", "agents", "random", "--name", "x", "--nats", "ftp://h", "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2 and "scheme" in out.stderr


async def test_a_dead_server_in_front_of_the_list_is_skipped(nats_url: str) -> None:
    dead = f"nats://127.0.0.1:{free_port()}"
    nc = await connect(f"{dead},{nats_url}", name="list")
    try:
        assert nc.is_connected and nc.connected_url is not None
        assert nc.connected_url.port == urlsplit(nats_url).port
    finally:
        await nc.close()


async def test_a_wrong_url_still_fails_fast_for_a_short_lived_tool() -> None:
    with pytest.raises(ConnectionError, match="cannot connect to NATS"):
        await asyncio.wait_for(connect(f"nats://127.0.0.1:{free_port()}", name="nobody"), timeout=30)


async def test_a_short_lived_client_outlives_a_long_outage(caplog: pytest.LogCaptureFixture) -> None:
    """`submit` used to give up after three attempts (about 1.5 s) and hang; now it comes back."""
    caplog.set_level(logging.WARNING, logger="bus.connect")
    port = free_port()
    srv = EmbeddedNats(port=port).start()
    nc = await connect(srv.url, name="outage")
    got: list[bytes] = []
    subject = uid("outage")

    async def keep(msg: Msg) -> None:
        got.append(msg.data)

    await nc.subscribe(subject, cb=keep)
    try:
        srv.stop()
        await asyncio.sleep(4.0)  # far beyond the old 3 attempts x 0.5 s
        assert not nc.is_closed
        srv = EmbeddedNats(port=port).start()
        for _ in range(200):
            if nc.is_connected:
                break
            await asyncio.sleep(0.1)
        assert nc.is_connected
        # The subscription came back with the connection.
        await nc.publish(subject, b"after")
        await flush(nc, within_s=5)
        for _ in range(50):
            if got:
                break
            await asyncio.sleep(0.1)
        assert got == [b"after"]
        text = caplog.text
        assert "outage: disconnected from nats://127.0.0.1" in text
        assert "outage: reconnected to nats://127.0.0.1" in text
    finally:
        await nc.close()
        srv.stop()


async def test_replication_is_a_setting_and_a_single_server_says_it_cannot(
    nats_url: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("SPIELBUS_STREAM_REPLICAS", "3")
    assert stream_replicas() == 3
    set_stream_replicas(2)
    try:
        assert stream_replicas() == 2  # the flag wins over the environment
    finally:
        set_stream_replicas(None)
    monkeypatch.setenv("SPIELBUS_STREAM_REPLICAS", "9")
    with pytest.raises(StreamError, match="SPIELBUS_STREAM_REPLICAS"):
        stream_replicas()
    monkeypatch.delenv("SPIELBUS_STREAM_REPLICAS")
    assert stream_replicas() == 1

    nc = await connect(nats_url, name="replicas")
    try:
        js = nc.jetstream()
        fresh = Subjects(uid("r").replace("-", "_"))
        with pytest.raises(StreamError, match="need a NATS cluster"):
            await ensure_streams(js, fresh, replicas=3)
        await ensure_streams(js, fresh)  # 1 by default: fine on one server
        info = await js.stream_info(fresh.matches_stream)
        assert info.config.num_replicas == 1
        caplog.set_level(logging.WARNING, logger="bus.streams")
        await ensure_streams(js, fresh, replicas=3)  # exists: kept as it is, and said so
        assert "has 1 replicas, not the 3 asked for" in caplog.text
        for name in (fresh.matches_stream, fresh.schedule_stream):
            await js.delete_stream(name)
    finally:
        await nc.close()


async def test_a_service_waits_for_a_bus_that_starts_after_it(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="bus.connect")
    port = free_port()
    pending = asyncio.create_task(connect(f"nats://127.0.0.1:{port}", name="early", service=True))
    await asyncio.sleep(2.5)
    assert not pending.done()
    with EmbeddedNats(port=port):
        nc = await asyncio.wait_for(pending, timeout=30)
        assert nc.is_connected
        await nc.close()
    # Told once, not once per attempt.
    assert caplog.text.count("early: no server reachable yet") == 1


def test_a_referee_asking_a_single_server_for_replicas_exits_1_saying_why(nats_url: str) -> None:
    prefix = uid("rp").replace("-", "_")
    cmd = [sys.executable, "-m", "spielbus.cli", "referee", "--nats", nats_url, "--prefix", prefix]
    out = subprocess.run(
        [*cmd, "--stream-replicas", "3"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 1, out.stderr
    assert "3 replicas" in out.stderr and "need a NATS cluster" in out.stderr
    assert "Traceback" not in out.stderr


async def test_a_referee_worker_stopped_while_the_bus_is_down_at_start_returns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """ensure_streams waits for the bus (retrying); stop() must still end the worker at once."""
    import referee.worker as worker_module

    # Waiting for the streams "forever": only stop() can end run() within the test's timeout.
    waiting = asyncio.Event()

    async def ensure_streams_forever(*args: Any, **kw: Any) -> None:
        waiting.set()
        await ensure_streams(*args, **kw, wait_s=3600)

    monkeypatch.setattr(worker_module, "ensure_streams", ensure_streams_forever)
    srv = EmbeddedNats().start()
    nc = await connect(srv.url, name="stopped-early")
    try:
        srv.stop()
        worker = worker_module.RefereeWorker(nc, subjects=Subjects(uid("se").replace("-", "_")))
        run = asyncio.create_task(worker.run())
        await asyncio.wait_for(waiting.wait(), 60)
        assert not run.done()  # waiting for the bus
        worker.stop()
        await asyncio.wait_for(run, timeout=60)
    finally:
        await nc.close()


class _WireTap:
    """A TCP relay in front of a real nats-server that keeps what the client sent, in order."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.sent = bytearray()
        self.server: asyncio.Server | None = None
        self.port = 0
        self.relays: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for task in self.relays:
            task.cancel()
        await asyncio.gather(*self.relays, return_exceptions=True)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.relays.add(task)
        server_r, server_w = await asyncio.open_connection("127.0.0.1", self.upstream_port)

        async def pipe(r: asyncio.StreamReader, w: asyncio.StreamWriter, keep: bool) -> None:
            while data := await r.read(65536):
                if keep:
                    self.sent.extend(data)
                w.write(data)
                await w.drain()

        try:
            await asyncio.gather(pipe(client_r, server_w, True), pipe(server_r, client_w, False))
        finally:
            for w in (client_w, server_w):
                w.close()
                with contextlib.suppress(Exception):
                    await w.wait_closed()

    def after(self, mark: int) -> bytes:
        return bytes(self.sent[mark:])


async def _tapped(nats_server: EmbeddedNats) -> tuple[_WireTap, NATS]:
    tap = _WireTap(nats_server.port)
    await tap.start()
    nc = await connect(f"nats://127.0.0.1:{tap.port}", name="tapped")
    return tap, nc


async def test_our_flush_sends_the_subscription_before_its_ping(nats_server: EmbeddedNats) -> None:
    """The server handles one connection's commands in order, so SUB ahead of PING on the wire is
    what makes the PONG mean "subscribed". A stray PING from nats-py's own flush may follow."""
    tap, nc = await _tapped(nats_server)
    try:
        mark = len(tap.sent)
        await nc.subscribe("tap.order.ours")
        await flush(nc)
        wire = tap.after(mark)
        assert b"SUB tap.order.ours" in wire
        assert wire.index(b"SUB tap.order.ours") < wire.index(b"PING\r\n")
    finally:
        await nc.close()
        await tap.close()


async def test_nats_py_flush_alone_pings_ahead_of_a_queued_subscription(nats_server: EmbeddedNats) -> None:
    """Why `bus.connect.flush` exists: the pinned nats-py's `Client.flush` puts its PING on the wire
    before the SUB queued just before it. When an upgrade makes this fail, `flush` can go."""
    tap, nc = await _tapped(nats_server)
    try:
        mark = len(tap.sent)
        await nc.subscribe("tap.order.theirs")
        await nc.flush()
        await flush(nc)  # let the queued SUB out, so the tap has seen both
        wire = tap.after(mark)
        assert wire.index(b"PING\r\n") < wire.index(b"SUB tap.order.theirs")
    finally:
        await nc.close()
        await tap.close()


def _loaded(code: str) -> list[str]:
    """The modules named nats* or aiohttp* a fresh interpreter holds after running `code`."""
    probe = (
        f"import sys; {code}; print(sorted(m for m in sys.modules if m.split('.')[0] in ('nats', 'aiohttp')))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return list(ast.literal_eval(out.stdout.strip()))


def test_processes_start_without_aiohttp() -> None:
    """nats.py's WebSocket transport alone needs aiohttp: an agent process, the referee, the command
    line and the metrics import nats.py without it (bus/nats_import.py), a quarter of a start-up's
    CPU; a process that imports only the games does not import nats.py at all."""
    for package_first in ("agents.cli", "referee.worker", "spielbus.cli", "observability.metrics"):
        loaded = _loaded(f"import {package_first}")
        assert not [m for m in loaded if m.startswith("aiohttp")], (package_first, loaded)
    assert "nats.aio.transport" in _loaded("import agents.cli")  # nats.py itself is there
    assert _loaded("import games.loader") == []


async def test_a_websocket_url_connects_through_bus_connect(tmp_path) -> None:
    """ws:// still works: `connect` gives nats.py its aiohttp when a URL needs it (a real
    nats-server with its WebSocket listener)."""
    ws_port = free_port()
    conf = tmp_path / "ws.conf"
    conf.write_text(f'websocket {{\n  listen: "127.0.0.1:{ws_port}"\n  no_tls: true\n}}\n')
    with EmbeddedNats(config=conf, jetstream=False):
        nc = await connect(f"ws://127.0.0.1:{ws_port}", name="ws-test")
        try:
            subject = uid("ws")

            async def upper(msg: Msg) -> None:
                await msg.respond(msg.data.upper())

            sub = await nc.subscribe(subject, cb=upper)
            reply = await nc.request(subject, b"over websocket", timeout=10)
            assert reply.data == b"OVER WEBSOCKET"
            await sub.unsubscribe()
        finally:
            await nc.close()


def _gomaxprocs(**kw: Any) -> int:
    """The Go processors an embedded server reports (`/varz`), started with `kw`."""
    port = free_port()
    with EmbeddedNats(jetstream=False, monitor_port=port, **kw):
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=10) as reply:
            return int(json.load(reply)["gomaxprocs"])


def test_an_embedded_server_runs_on_the_processors_it_is_given(monkeypatch: pytest.MonkeyPatch) -> None:
    # A training session's server gets one Go processor (bus/server.py, docs/performance.md); an
    # operator's own GOMAXPROCS wins, and a count below one is refused.
    monkeypatch.delenv("GOMAXPROCS", raising=False)
    assert _gomaxprocs(cpus=1) == 1
    monkeypatch.setenv("GOMAXPROCS", "2")
    assert _gomaxprocs(cpus=1) == 2
    with pytest.raises(ValueError, match="at least 1"):
        EmbeddedNats(cpus=0)
