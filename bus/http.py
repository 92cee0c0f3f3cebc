"""Serving an aiohttp app in the running event loop: the live page's and the human seat's."""

from __future__ import annotations

from aiohttp import web


async def serve_app(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Start `app` on `host:port` (0: any free port); the runner and the port actually bound."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    # AppRunner.addresses: the bound (host, port, ...) of every site, so port 0 reports the real one.
    return runner, int(runner.addresses[0][1]) if runner.addresses else port
