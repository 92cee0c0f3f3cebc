"""bus/conn_events.py: a connection coming back or closing is an event for every watcher, and the
client's own callbacks (bus/connect.py's logging) still run. Real nats-server, restarted for real."""

from __future__ import annotations

import asyncio

from bus import conn_events
from bus.connect import connect
from tests.reliability_helpers import RestartableNats


async def test_a_reconnect_and_a_close_wake_every_watcher_and_keep_the_clients_callbacks() -> None:
    srv = RestartableNats().start()
    try:
        nc = await connect(srv.url, name="watched")
        own: list[str] = []
        logged_reconnect, logged_close = nc._reconnected_cb, nc._closed_cb
        assert logged_reconnect is not None and logged_close is not None

        async def on_reconnect() -> None:
            own.append("reconnected")
            await logged_reconnect()

        async def on_close() -> None:
            own.append("closed")
            await logged_close()

        nc._reconnected_cb, nc._closed_cb = on_reconnect, on_close
        with conn_events.watch(nc) as first, conn_events.watch(nc) as second:
            assert not first.is_set() and not second.is_set()
            srv.kill()
            srv.start()
            await asyncio.wait_for(first.wait(), 60)
            await asyncio.wait_for(second.wait(), 60)
            assert nc.is_connected and own == ["reconnected"]
            first.clear()
            second.clear()
            await nc.close()
            await asyncio.wait_for(first.wait(), 30)
            assert second.is_set() and own == ["reconnected", "closed"]
        # A watcher that has left is not woken (nor kept).
        with conn_events.watch(nc) as third:
            pass
        assert not third.is_set()
    finally:
        srv.close()
