"""nats.py imported without aiohttp, which only its WebSocket transport needs, until a URL needs it.

nats.py imports aiohttp when it is itself imported, for its `ws://`/`wss://` transport. That import
was a quarter of an agent process's start-up (0.18 s of CPU of 0.70 s on an idle machine,
benchmarks/startup_cpu.py), paid by every agent, referee and command, while nearly every run
uses `nats://` or `tls://`. `install()` (run by `bus/__init__.py`, which every package of ours that
imports nats.py imports first) puts a finder on `sys.meta_path` that, when nats.py's transport
module is imported, runs it with `aiohttp` masked, so nats.py keeps `aiohttp = None`; a process that
never imports nats.py (a game in the sandbox, an analysis worker) imports nothing more.
`websocket_ready()` (called by `bus.connect.connect` for WebSocket URLs) then gives nats.py the
real aiohttp. Limits: a process that imported nats.py before any package of ours keeps it as it
was; code that opens a WebSocket connection with nats.py directly, not through `bus.connect`, must
call `websocket_ready()` first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Sequence
from types import ModuleType

TRANSPORT = "nats.aio.transport"


class _MaskedLoader(importlib.abc.Loader):
    """The transport module's own loader, run with `import aiohttp` failing (unless already imported)."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        if "aiohttp" in sys.modules:
            self.loader.exec_module(module)
            return
        sys.modules["aiohttp"] = None  # type: ignore[assignment]  # `import aiohttp` raises ImportError
        try:
            self.loader.exec_module(module)
        finally:
            if sys.modules.get("aiohttp", 0) is None:
                del sys.modules["aiohttp"]


class _TransportFinder(importlib.abc.MetaPathFinder):
    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != TRANSPORT:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = _MaskedLoader(spec.loader)
        return spec


def install() -> None:
    """Mask aiohttp for nats.py's transport module when it is imported (once per process)."""
    if TRANSPORT not in sys.modules and not any(isinstance(f, _TransportFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _TransportFinder())


def websocket_ready() -> None:
    """Give nats.py's WebSocket transport its aiohttp (imported now if it was left out)."""
    import nats.aio.transport as transport

    if transport.aiohttp is None:
        transport.aiohttp = importlib.import_module("aiohttp")
