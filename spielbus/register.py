"""Self-serve registration on a ladder: `spielbus ladder register|registrar|approve|revoke|bots`.

- `spielbus ladder registrar FILE.toml --auth DIR [--nats URL] [--port N]`: the operator's
  registrar. Serves `POST /register` (JSON `{name, user, checker, invite?}`: two public nkeys)
  with the ladder file's `[registration]` policy (open, invite, approval) over the registry folder
  of `spielbus auth init --registry` (bus/registry.py), pushing new accounts to nats-server as the
  system user (`DIR/system.creds`): no restart, nobody else's login touched.
- `spielbus ladder register NAME --ladder URL [--invite CODE] [--out DIR]`: what a bot author
  runs. Makes the two user keys locally (kept in `OUT/NAME.seeds`, mode 0600, reused on a second
  run, so a pending registration is collected by running it again once approved), asks the
  registrar, and writes `OUT/NAME.creds`, `OUT/NAME-botcheck.creds` and the login file
  `OUT/NAME.env` (`NATS_CREDS`, `NATS_URL`, `SPIELBUS_BOTCHECK_CREDS`, `SPIELBUS_BOTCHECK_INBOX`,
  and `NATS_TLS_CA=OUT/ca.pem` when the bus has a private CA, whose certificate the answer carries):
  what `spielbus agent`, the example bots and `spielbus bot-check NAME --login OUT/NAME.env` read.
  Exit 0 registered, 4 pending approval, 2 refused (the message says why), 1 registrar unreachable.
- `spielbus ladder approve|revoke NAME --auth DIR [--nats URL]`: the operator's decision, pushed at
  once (a revoked bot's connections are closed and its login refused from then on).
- `spielbus ladder bots --auth DIR`: the registered bots and their status.

Limits: the registrar speaks plain HTTP unless given `--tls-cert/--tls-key`; invite codes travel
in the request, so serve it over HTTPS (or behind a TLS proxy) when it is on the internet. No
per-address rate limit: `max_bots` in the policy bounds what an open registrar hands out.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import ssl
import sys
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, ValidationError

from bus.auth import AuthError, botcheck_inbox, where_text, write_private

if TYPE_CHECKING:
    from aiohttp import web

    from bus.connect import Login
    from bus.registry import Registrar

MAX_BODY = 16 * 1024
EXIT_PENDING = 4


class RegisterRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    name: str
    user: str
    checker: str
    invite: str | None = None


# -- the registrar (operator) ------------------------------------------------------------------


def _registrar_app(registrar: Registrar) -> web.Application:
    from aiohttp import web

    from bus.registry import RegistrationError

    async def register(request: web.Request) -> web.Response:
        try:
            body = RegisterRequest.model_validate_json(await request.read())
            answer = await registrar.register(body.name, body.user, body.checker, body.invite)
        except (ValidationError, ValueError) as exc:
            # RegistrationError is a ValueError: the message says what to change.
            text = str(exc) if isinstance(exc, RegistrationError) else f"bad request: {exc}"
            return web.json_response({"error": text}, status=400)
        except AuthError as exc:
            return web.json_response({"error": f"the registrar failed: {exc}"}, status=503)
        return web.json_response(answer.model_dump(), status=200 if answer.status == "active" else 202)

    async def policy(_request: web.Request) -> web.Response:
        p = registrar.policy
        return web.json_response({"policy": p.policy, "limits": p.limits.model_dump()})

    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post("/register", register)
    app.router.add_get("/policy", policy)
    return app


async def _serve_registrar(args: argparse.Namespace) -> None:
    from aiohttp import web

    from bus.connect import connect, nats_url
    from bus.registry import Registrar
    from referee.config import ConfigError
    from referee.ladder.config import load_ladder

    config = load_ladder(args.file)
    if config.registration is None:
        raise ConfigError(f"{args.file}: no [registration] table: this ladder admits no registered bots")
    nc = await connect(
        nats_url(args.nats), name="spielbus-registrar", service=True, **_system_login(args.auth)
    )
    try:
        registrar = Registrar(args.auth, config.registration, nc)
        pushed = await registrar.sync()
        tls = _server_tls(args)
        runner = web.AppRunner(_registrar_app(registrar), access_log=None)
        await runner.setup()
        await web.TCPSite(runner, args.host, args.port, ssl_context=tls).start()
        where = f"{'https' if tls else 'http'}://{args.host}:{args.port}/"
        print(
            f"registrar of {config.name} ({config.registration.policy}) on {where}: {pushed} bots",
            flush=True,
        )
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await stop.wait()
        await runner.cleanup()
    finally:
        await nc.close()


def _server_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not args.tls_cert:
        return None
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(args.tls_cert, args.tls_key)
    return ctx


def _system_login(folder: str) -> Login:
    from bus.registry import service_login

    return service_login(folder, "system")


# -- the bot author ------------------------------------------------------------------------------


def _seeds(out: Path, name: str) -> tuple[str, str]:
    """The bot's two user seeds, made once and kept (a second run after approval reuses them)."""
    from bus import nats_jwt as J

    path = out / f"{name}.seeds"
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return str(data["user"]), str(data["checker"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise AuthError(f"{path} is not a seeds file of `spielbus ladder register`: {exc}") from exc
    user, checker = J.new_key("user"), J.new_key("user")
    write_private(path, json.dumps({"user": user, "checker": checker}) + "\n")
    return user, checker


def _post(url: str, body: dict[str, object], ca: str | None) -> tuple[int, dict[str, object]]:
    ctx = ssl.create_default_context(cafile=ca) if url.startswith("https:") else None
    req = urllib.request.Request(
        url.rstrip("/") + "/register",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=30, context=ctx) as resp:
            return resp.status, json.loads(resp.read(1024 * 1024))
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read(64 * 1024))
        except ValueError:
            return exc.code, {"error": f"HTTP {exc.code} {exc.reason}"}


def register(name: str, ladder: str, out: Path, invite: str | None = None, ca: str | None = None) -> int:
    from bus import nats_jwt as J
    from bus.registry import Answer
    from bus.subjects import check_agent_name

    check_agent_name(name)
    out.mkdir(parents=True, exist_ok=True)
    user, checker = _seeds(out, name)
    body: dict[str, object] = {"name": name, "user": J.public_key(user), "checker": J.public_key(checker)}
    if invite:
        body["invite"] = invite
    status, data = _post(ladder, body, ca)
    if status >= 400:
        print(f"spielbus ladder register: refused: {data.get('error', data)}", file=sys.stderr)
        return 2
    answer = Answer.model_validate(data)
    if answer.status != "active" or not answer.jwt or not answer.checker_jwt:
        print(
            f"{name}: registered as account {answer.account}, {answer.status}: waiting for the operator's "
            "approval; run this command again (same --out) once approved"
        )
        return EXIT_PENDING
    creds, check_creds, env = out / f"{name}.creds", out / f"{name}-botcheck.creds", out / f"{name}.env"
    write_private(creds, J.creds_text(answer.jwt, user))
    write_private(check_creds, J.creds_text(answer.checker_jwt, checker))
    text = (
        f"# spielbus credentials: bot {name} (keep it private), from `spielbus ladder register`\n"
        f"NATS_CREDS={creds.resolve()}\n"
        f"SPIELBUS_BOTCHECK_CREDS={check_creds.resolve()}\n"
        f"SPIELBUS_BOTCHECK_INBOX={botcheck_inbox(name)}\n"
    )
    bus_ca: Path | None = None
    if answer.ca_pem:  # the bus's TLS certificate is signed by the ladder's private CA
        bus_ca = out / "ca.pem"
        bus_ca.write_text(answer.ca_pem, encoding="utf-8")
    write_private(env, text + where_text(answer.url, str(bus_ca.resolve()) if bus_ca else None))
    print(f"{name}: registered as account {answer.account}; login file {env} (see docs/ladder.md)")
    return 0


# -- the operator's decisions ---------------------------------------------------------------------


async def _decide(folder: str, name: str, status: str, url: str | None) -> None:
    from bus.connect import connect, nats_url
    from bus.registry import change_status

    nc = await connect(nats_url(url), name="spielbus-registry", **_system_login(folder))
    try:
        await change_status(folder, name, "active" if status == "approve" else "revoked", nc)
    finally:
        await nc.close()


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="spielbus ladder", description="registered bots (docs/ladder.md)")
    sub = p.add_subparsers(dest="what", required=True)
    reg = sub.add_parser("register", help="register bot NAME with a ladder's registrar (a bot author)")
    reg.add_argument("name", metavar="NAME")
    reg.add_argument(
        "--ladder", required=True, metavar="URL", help="the registrar, e.g. https://ladder.example:8402"
    )
    reg.add_argument("--invite", default=None, help="an invite code (ladders with policy `invite`)")
    reg.add_argument("--out", default=".", help="folder for the seeds, creds and login file (default .)")
    reg.add_argument("--tls-ca", default=None, metavar="FILE", help="CA file to verify an https registrar")
    srv = sub.add_parser(
        "registrar", help="serve registration for a ladder file's [registration] (the operator)"
    )
    srv.add_argument("file", metavar="FILE.toml")
    srv.add_argument(
        "--auth", required=True, metavar="DIR", help="the `spielbus auth init --registry` folder"
    )
    srv.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL)")
    srv.add_argument("--host", default="127.0.0.1", help="address to listen on (0.0.0.0: every interface)")
    srv.add_argument("--port", type=int, default=8402, help="port (default 8402)")
    srv.add_argument("--tls-cert", default=None, metavar="FILE", help="serve HTTPS with this certificate")
    srv.add_argument("--tls-key", default=None, metavar="FILE", help="its private key")
    for verb, what in (
        ("approve", "admit a pending bot"),
        ("revoke", "cut a bot off (its name stays taken)"),
    ):
        d = sub.add_parser(verb, help=f"{what} (the operator; takes effect at once)")
        d.add_argument("name", metavar="NAME")
        d.add_argument("--auth", required=True, metavar="DIR", help="the registry folder")
        d.add_argument("--nats", default=None, help="NATS URL (default $NATS_URL)")
    bots = sub.add_parser("bots", help="list the registered bots and their status")
    bots.add_argument("--auth", required=True, metavar="DIR", help="the registry folder")
    return p


def main(argv: Sequence[str]) -> int:
    from bus.registry import load_registry
    from referee.config import ConfigError

    args = _parser().parse_args(list(argv))
    try:
        if args.what == "register":
            return register(args.name, args.ladder, Path(args.out), args.invite, args.tls_ca)
        if args.what == "registrar":
            asyncio.run(_serve_registrar(args))
            return 0
        if args.what in ("approve", "revoke"):
            asyncio.run(_decide(args.auth, args.name, args.what, args.nats))
            print(f"{args.name}: {'approved' if args.what == 'approve' else 'revoked'}")
            return 0
        for name, bot in load_registry(args.auth).bots.items():
            print(f"{name}\t{bot.status}")
        return 0
    except (AuthError, ConfigError, ValueError) as exc:
        print(f"spielbus ladder {args.what}: {exc}", file=sys.stderr)
        return 2
    except (OSError, urllib.error.URLError) as exc:
        hint = (
            "; give the CA that signed it with --tls-ca FILE"
            if "CERTIFICATE_VERIFY_FAILED" in str(exc)
            else ""
        )
        print(f"spielbus ladder {args.what}: {exc}{hint}", file=sys.stderr)
        return 1
