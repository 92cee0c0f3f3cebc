"""Connecting to NATS: one place for timeouts, reconnect policy and credentials.

Services (referee workers, agents) reconnect forever: a NATS restart must not
kill a tournament. Short-lived tools (submit, bot-check) give up after a few
attempts so that a wrong URL fails fast with a clear message.
nats-py's default request timeout of 0.5 s is far too short for LLM turns, so
every request in this code base passes its own timeout, derived from the turn deadline.
"""

from __future__ import annotations

import logging
import os

import nats
from nats.aio.client import Client as NATS

log = logging.getLogger(__name__)

DEFAULT_URL = "nats://127.0.0.1:4222"


def nats_url(explicit: str | None = None) -> str:
    return explicit or os.environ.get("NATS_URL") or DEFAULT_URL


async def connect(
    url: str | None = None,
    *,
    name: str,
    service: bool = False,
    creds: str | None = None,
    user: str | None = None,
    password: str | None = None,
    inbox_prefix: str | None = None,
) -> NATS:
    """Connect to NATS. `service=True` reconnects forever; otherwise fail after a few seconds."""

    async def on_error(exc: Exception) -> None:
        log.warning("nats %s: %s", name, exc)

    async def on_disconnect() -> None:
        log.info("nats %s: disconnected", name)

    async def on_reconnect() -> None:
        log.info("nats %s: reconnected", name)

    opts: dict[str, object] = {
        "name": name,
        "error_cb": on_error,
        "disconnected_cb": on_disconnect,
        "reconnected_cb": on_reconnect,
        "connect_timeout": 5,
        "max_reconnect_attempts": -1 if service else 3,
        "reconnect_time_wait": 1 if service else 0.5,
        # Match records can be large (long games with usage per move); the server default caps at 1 MB.
        "pending_size": 64 * 1024 * 1024,
    }
    if not (creds or user):
        # The environment only when no login was passed: `--auth DIR` must win over a stray
        # NATS_CREDS, or nats-py would send both and the server pick one.
        creds = os.environ.get("NATS_CREDS")
        user = os.environ.get("NATS_USER")
        password = password or os.environ.get("NATS_PASSWORD")
        # A user without `_INBOX.>` (spectator, bot-check) has a private inbox; its env file names it.
        inbox_prefix = inbox_prefix or os.environ.get("NATS_INBOX_PREFIX")
    if inbox_prefix:
        opts["inbox_prefix"] = inbox_prefix
    if creds:
        opts["user_credentials"] = creds
    if user:
        opts["user"] = user
        opts["password"] = password or ""
    target = nats_url(url)
    try:
        return await nats.connect(target, **opts)  # type: ignore[arg-type]
    except Exception as exc:  # nats-py raises a mix of its own and OS errors here
        raise ConnectionError(f"cannot connect to NATS at {target}: {exc}") from exc
