"""nats.py imported without aiohttp, which only its WebSocket transport needs, until a URL needs it.

nats.py imports aiohttp when it is itself imported, for its `ws://`/`wss://` transport. That import
was a quarter of an agent process's start-up (0.18 s of CPU of 0.70 s on an idle machine,
benchmarks/startup_cpu.py), paid by every agent, referee and command, while nearly every run
uses `nats://` or `tls://`. Every package of ours that imports nats.py imports `bus` first (its
`__init__`), which imports this module: it imports nats.py with `aiohttp` masked, so nats.py keeps
`aiohttp = None`. `websocket_ready()` (called by `bus.connect.connect` for WebSocket URLs) then
gives nats.py the real aiohttp. Limits: a process that imported nats.py or aiohttp before any
package of ours keeps them as they were (nothing is masked); code that opens a WebSocket
connection with nats.py directly, not through `bus.connect`, must call `websocket_ready()` first.
"""

from __future__ import annotations

import importlib
import sys


def _import_nats_without_aiohttp() -> None:
    if "nats" in sys.modules or "aiohttp" in sys.modules:
        return
    sys.modules["aiohttp"] = None  # type: ignore[assignment]  # `import aiohttp` raises ImportError
    try:
        import nats.aio.transport  # noqa: F401
    finally:
        del sys.modules["aiohttp"]


def websocket_ready() -> None:
    """Give nats.py's WebSocket transport its aiohttp (imported now if it was left out)."""
    import nats.aio.transport as transport

    if transport.aiohttp is None:
        transport.aiohttp = importlib.import_module("aiohttp")


_import_nats_without_aiohttp()
