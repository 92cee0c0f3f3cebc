"""The live match page (aiohttp) and the spectators' feed it reads; see `observability.web.app`."""

from __future__ import annotations

import argparse


def port_arg(value: str) -> int | None:
    """argparse type for ports: a number (0 = any free port) or `off` (None). Kept here, free of
    heavy imports, because the `spielbus` parser is built for every command."""
    if value.lower() in ("off", "none", "no"):
        return None
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a port: {value!r} (a number, 0 for any free port, or off)"
        ) from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} out of range (0-65535)")
    return port
