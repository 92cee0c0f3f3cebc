"""Connecting to NATS: one place for server lists, timeouts, reconnect policy and credentials.

Every Spielbus process connects through `connect()` here (agents, referee workers, `run`,
`submit`, `bot-check`, the live page), so the policy below holds everywhere:

- A URL may name several servers of one NATS cluster, comma-separated
  (`nats://a:4222,nats://b:4222`, in `--nats` and in `NATS_URL`); the client picks one,
  learns the rest of the cluster from it, and moves to another when its server goes away.
- Once connected, every client reconnects without limit: a NATS restart or a lost node must
  never leave a tournament hanging on a dead client. Attempts go round the server list at
  once (a cluster usually has a live node), then back off exponentially with jitter up to
  `RECONNECT_MAX_WAIT_S`, so that a hundred agents do not hammer a restarting server in step.
- The first connection differs: services (`service=True`: referee workers, agents) wait for
  the bus forever, since they are often started before it; short-lived tools (submit,
  bot-check) give up after a few attempts so that a wrong URL fails fast with a clear message.
- Disconnects and reconnects are logged at WARNING (with the server and the outage's
  length); the failed attempts in between at DEBUG, so a long outage does not flood the log.
- A login the server refuses on a live connection (credentials replaced by `auth init --force`
  and a reload, or revoked by `spielbus ladder revoke`) ends that connection for good (nats-py
  does not retry it): logged as CRITICAL, and a service process exits with code 3 at once
  rather than run on deaf.
- TLS: a `tls://` URL, or a CA file (`tls_ca`, `NATS_TLS_CA`, the commands' `--tls-ca`), gives
  nats-py a verifying context (the system's CAs plus that file); an unverifiable certificate ends
  the first connection at once with a message naming the fix (bot-check used to retry 150 s).
- Pings every `PING_INTERVAL_S`: a server whose machine vanished without closing the
  connection is noticed within about `PING_INTERVAL_S * (MAX_OUTSTANDING_PINGS + 1)`.

`flush(nc)` here, not `nc.flush()`: nats-py 2.16's own flush can return before the server has
seen a subscription made just before it (see `flush`).

nats-py's default request timeout of 0.5 s is far too short for LLM turns, so every
request in this code base passes its own timeout, derived from the turn deadline.
Limits: plain TCP (`nats://`, `tls://`) or WebSocket (`ws://`, `wss://`) URLs, not both in
one list; a password inside a URL is accepted but redacted from every message we print.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import time
from collections.abc import Callable
from typing import Any, TypedDict
from urllib.parse import urlsplit

import nats.errors
from nats.aio.client import Client as NATS
from nats.aio.client import Server

from bus.nats_import import websocket_ready
from bus.tls import client_context, is_certificate_error

log = logging.getLogger(__name__)

DEFAULT_URL = "nats://127.0.0.1:4222"
SCHEMES = ("nats", "tls", "ws", "wss")
WEBSOCKET_SCHEMES = ("ws", "wss")


def is_websocket(server: str) -> bool:
    """Whether a server URL (as `nats_servers` returns it) is a WebSocket one."""
    return urlsplit(server).scheme in WEBSOCKET_SCHEMES


RECONNECT_FIRST_WAIT_S = 0.25
RECONNECT_MAX_WAIT_S = 5.0
PING_INTERVAL_S = 10
MAX_OUTSTANDING_PINGS = 2
# The first connection of a short-lived tool: attempts per server before giving up.
FIRST_CONNECT_ATTEMPTS = 3


class NatsURLError(ValueError):
    """A `--nats` / `NATS_URL` value that names no usable server."""


def nats_url(explicit: str | None = None) -> str:
    """The URL (or comma-separated URLs) to use: `explicit`, else `$NATS_URL`, else the local default."""
    return explicit or os.environ.get("NATS_URL") or DEFAULT_URL


def nats_servers(url: str | None = None, *, source: str = "NATS URL") -> list[str]:
    """Split and check a comma-separated server list; each item gets a scheme and a port.

    `host:port` means `nats://host:port`; `nats://host` means port 4222. Raises NatsURLError
    naming `source` (e.g. `--nats`, `NATS_URL`) and the bad item (its password redacted).
    """
    text = nats_url(url)
    servers: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            continue
        full = item if "://" in item else f"nats://{item}"
        try:
            parts = urlsplit(full)
            port = parts.port
        except ValueError as exc:
            raise NatsURLError(f"{source}: bad server URL {redact(item)!r}: {exc}") from exc
        if parts.scheme not in SCHEMES:
            raise NatsURLError(
                f"{source}: bad server URL {redact(item)!r}: the scheme must be one of {', '.join(SCHEMES)}"
            )
        if not parts.hostname:
            raise NatsURLError(f"{source}: bad server URL {redact(item)!r}: no host")
        if parts.path not in ("", "/") or parts.query or parts.fragment:
            raise NatsURLError(f"{source}: bad server URL {redact(item)!r}: a server URL has no path")
        if port is None and parts.scheme in ("nats", "tls"):
            full = f"{full.rstrip('/')}:4222"
        servers.append(full)
    if not servers:
        raise NatsURLError(f"{source}: no server URL in {text!r}")
    web = {is_websocket(s) for s in servers}
    if len(web) > 1:
        raise NatsURLError(f"{source}: do not mix WebSocket (ws://, wss://) and nats:// servers in one list")
    return servers


def nats_url_arg(text: str) -> str:
    """argparse `type=` for `--nats`: checks the list now, so a typo is a usage error (exit 2)."""
    try:
        return ",".join(nats_servers(text, source="--nats"))
    except NatsURLError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--nats: ")) from exc


def redact(url: str) -> str:
    """`url` (or a comma-separated list) without any password in it, for messages and logs."""
    out = []
    for item in url.split(","):
        try:
            parts = urlsplit(item.strip() if "://" in item else f"nats://{item.strip()}")
            if parts.password is not None:
                host = parts.netloc.rsplit("@", 1)[1]
                item = item.replace(parts.netloc, f"{parts.username}:***@{host}")
        except ValueError:
            item = "(unparsable)"
        out.append(item.strip())
    return ",".join(out)


class ReconnectPolicy:
    """nats-py's `reconnect_to_server_handler`: which server to try next and how long to wait first.

    The least-failed server is tried first (ties broken at random, which spreads the clients
    of a lost node over the survivors); the first round over the list is immediate, every
    later round waits twice as long as the one before, from RECONNECT_FIRST_WAIT_S up to
    RECONNECT_MAX_WAIT_S, times a random factor in [0.5, 1) so that clients do not move in step.
    """

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()

    def delay(self, rounds_failed: int) -> float:
        if rounds_failed <= 0:
            return 0.0
        wait = min(RECONNECT_MAX_WAIT_S, RECONNECT_FIRST_WAIT_S * 2 ** (rounds_failed - 1))
        return wait * self.rng.uniform(0.5, 1.0)

    def __call__(self, servers: list[Server], info: dict[str, Any]) -> tuple[Server | None, float]:
        if not servers:
            return None, RECONNECT_MAX_WAIT_S
        fewest = min(s.reconnects for s in servers)
        pick = self.rng.choice([s for s in servers if s.reconnects == fewest])
        return pick, self.delay(fewest)


_CONNECTION_LOST = (
    nats.errors.UnexpectedEOF,
    nats.errors.StaleConnectionError,
    ConnectionResetError,
    BrokenPipeError,
)


class CertificateError(ConnectionError):
    """The server's TLS certificate cannot be verified (the message says how to fix it)."""


class _ConnectionLog:
    """The callbacks that log one connection's life: loud at the edges, quiet in between."""

    STILL_WAITING_EVERY_S = 30.0

    def __init__(self, name: str) -> None:
        self.name = name
        self.nc: NATS | None = None
        self.server = "?"
        self.connected_once = False
        self.down_since: float | None = None
        self.failed_attempts = 0
        self.last_warned = 0.0
        self.cause = ""
        self.fatal: Callable[[], None] | None = None

    def up(self, nc: NATS) -> None:
        self.nc = nc
        url = nc.connected_url
        self.server = redact(url.geturl()) if url is not None else "?"
        self.connected_once = True

    async def on_error(self, exc: Exception) -> None:
        if is_certificate_error(exc):
            # No retry fixes an unverifiable certificate: the first connection ends here (nats-py
            # lets an error callback's exception out of `connect`); a reconnect says it loudly.
            why = getattr(exc, "verify_message", "") or exc
            text = (
                f"TLS: the server's certificate could not be verified ({why}); "
                "name the CA that signed it with --tls-ca FILE or NATS_TLS_CA=FILE"
            )
            if not self.connected_once:
                raise CertificateError(text) from exc
            log.critical("nats %s: %s", self.name, text)
            return
        if isinstance(exc, (OSError, TimeoutError)) and (
            self.down_since is not None or not self.connected_once
        ):
            # One failed attempt of a (re)connect loop: counted, and told now and then, not each time.
            self.failed_attempts += 1
            now = time.monotonic()
            if self.failed_attempts == 1 or now - self.last_warned > self.STILL_WAITING_EVERY_S:
                self.last_warned = now
                log.warning("nats %s: no server reachable yet (%s); still trying", self.name, exc)
            else:
                log.debug("nats %s: attempt failed: %s", self.name, exc)
            return
        if self.connected_once and isinstance(exc, _CONNECTION_LOST):
            # The cause of the disconnect that follows: told with it, not as a warning of its own.
            self.cause = str(exc) or type(exc).__name__
            log.info("nats %s: connection lost: %s", self.name, self.cause)
            return
        log.warning("nats %s: %s", self.name, exc or type(exc).__name__)

    async def on_disconnect(self) -> None:
        if self.nc is not None and self.nc.is_closed:
            return  # closed on purpose (drain, close): no reconnect follows
        if self.down_since is None and self.connected_once:
            self.down_since = time.monotonic()
            self.failed_attempts = 0
            cause, self.cause = (f" ({self.cause})" if self.cause else ""), ""
            log.warning("nats %s: disconnected from %s%s; reconnecting", self.name, self.server, cause)

    def on_reconnect_for(self, nc: NATS) -> Any:
        async def on_reconnect() -> None:
            took = time.monotonic() - self.down_since if self.down_since is not None else 0.0
            self.up(nc)
            log.warning(
                "nats %s: reconnected to %s after %.1f s (%d failed attempts)",
                self.name,
                self.server,
                took,
                self.failed_attempts,
            )
            self.down_since = None
            self.failed_attempts = 0

        return on_reconnect

    async def on_closed(self) -> None:
        nc = self.nc
        if (
            self.connected_once
            and nc is not None
            and isinstance(nc.last_error, nats.errors.AuthorizationError)
        ):
            # The server closed a live connection refusing its login: the credentials were replaced
            # (`auth init --force` and a reload) or revoked (`spielbus ladder revoke`). nats-py does
            # not reconnect after that, so a service would go on deaf (issue 41): say so and exit.
            log.critical(
                "nats %s: the server refused this login (Authorization Violation) and closed the "
                "connection for good: its credentials were replaced or revoked; get the new login "
                "file and start again",
                self.name,
            )
            if self.fatal is not None:
                self.fatal()
            return
        log.info("nats %s: connection closed", self.name)


EXIT_LOGIN_REFUSED = 3


def _exit_login_refused() -> None:
    """A service whose login was refused exits at once with EXIT_LOGIN_REFUSED (its supervisor, e.g.
    compose's restart policy, starts it again with the login file as it is now). Nothing can be sent
    on a connection closed for good, and the referee's matches in flight stay in JetStream."""
    logging.shutdown()
    os._exit(EXIT_LOGIN_REFUSED)


class Login(TypedDict, total=False):
    """Who logs in: the keyword arguments of `connect` passed on as `**login` (none: the environment's)."""

    creds: str
    tls_ca: str
    user: str
    password: str
    inbox_prefix: str


async def connect(
    url: str | None = None,
    *,
    name: str,
    service: bool = False,
    creds: str | None = None,
    user: str | None = None,
    password: str | None = None,
    inbox_prefix: str | None = None,
    tls_ca: str | None = None,
    **extra: Any,
) -> NATS:
    """Connect to NATS (one URL or a comma-separated cluster list; default `$NATS_URL`).

    `service=True` waits for the first connection forever; otherwise it fails after a few
    attempts per server with a ConnectionError. Either way, reconnects never stop, except when the
    server refuses the login of a live connection (credentials replaced or revoked): nats-py closes
    it for good, and a service process then logs it and exits with EXIT_LOGIN_REFUSED (3).
    `inbox_prefix`: a private inbox for accounts without `_INBOX.>`; `extra` goes to nats-py.
    `tls_ca` (default `$NATS_TLS_CA`): a CA file to verify the server's TLS certificate with, beside
    the system's CAs; a certificate that cannot be verified fails at once (CertificateError).
    """
    env = os.environ.get("NATS_URL")
    source = "--nats" if url and url != env else ("NATS_URL" if env else "NATS URL")
    try:
        servers = nats_servers(url, source=source)
    except NatsURLError as exc:
        raise ConnectionError(str(exc)) from exc
    if is_websocket(servers[0]):  # one kind per list (nats_servers)
        websocket_ready()
    events = _ConnectionLog(name)
    if service:
        events.fatal = _exit_login_refused
    nc = NATS()
    opts: dict[str, Any] = {  # nats-py keyword arguments of many types
        "name": name,
        "error_cb": events.on_error,
        "disconnected_cb": events.on_disconnect,
        "reconnected_cb": events.on_reconnect_for(nc),
        "closed_cb": events.on_closed,
        "connect_timeout": 5,
        "allow_reconnect": True,
        "max_reconnect_attempts": -1 if service else FIRST_CONNECT_ATTEMPTS,
        "reconnect_time_wait": 1 if service else 0.5,
        "reconnect_to_server_handler": ReconnectPolicy(),
        "ping_interval": PING_INTERVAL_S,
        "max_outstanding_pings": MAX_OUTSTANDING_PINGS,
        # Match records can be large (long games with usage per move); the server default caps at 1 MB.
        # Also what is buffered while reconnecting.
        "pending_size": 64 * 1024 * 1024,
        **extra,
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
    tls_ca = tls_ca or os.environ.get("NATS_TLS_CA")
    if tls_ca or any(urlsplit(s).scheme == "tls" for s in servers):
        # With a context nats-py also upgrades a `nats://` URL whose server requires TLS.
        opts.setdefault("tls", client_context(tls_ca))
    if creds:
        opts["user_credentials"] = creds
    if user:
        opts["user"] = user
        opts["password"] = password or ""
    try:
        await nc.connect(servers, **opts)
    except CertificateError as exc:
        raise CertificateError(f"cannot connect to NATS at {redact(','.join(servers))}: {exc}") from exc
    except Exception as exc:  # nats-py raises a mix of its own and OS errors here
        raise ConnectionError(f"cannot connect to NATS at {redact(','.join(servers))}: {exc}") from exc
    # Connected: from now on reconnect without limit, whatever the first connection allowed.
    nc.options["max_reconnect_attempts"] = -1
    events.up(nc)
    events.failed_attempts = 0
    return nc


async def flush(nc: NATS, within_s: float = 10) -> None:
    """Return once the server has processed everything this client sent before the call.

    That is what `Client.flush` promises, but in nats-py 2.16.0 (pinned) it writes its PING
    straight to the socket while SUB and PUB commands still wait in the client's queue for
    its flusher task. The PONG can then come back before the server has seen them: another
    client's request right after `subscribe(); flush()` found "no responders" in a CI run.
    Here the queue is written first (the flusher's own force-flush), then the ping goes.
    The fix for nats-py itself, with the evidence: docs/patches/nats-py-flush-order.patch.
    """
    # A private method: the public API has no way to wait for the flusher task. Bounded, as
    # `Client.flush` is: a flusher task that dies with our request queued would never answer it.
    try:
        await asyncio.wait_for(nc._flush_pending(force_flush=True), within_s)
    except TimeoutError:
        raise nats.errors.FlushTimeoutError from None
    await nc.flush(timeout=within_s)  # type: ignore[arg-type]  # nats-py annotates it as int
