"""Bots that register themselves: NATS operator mode, one account per bot, added at run time.

`init_registry(dir)` (`spielbus auth init --registry`) writes an operator-mode deployment:

- `registry.json` (mode 0600): the operator's and every account's nkey seed, the registered bots
  (name, account, the public keys of their two users, status), the limits a bot account gets;
- `nats-server.conf`: `operator`, `system_account`, a `full` account resolver (directory
  `jwt/`, accounts added and updated at run time through `$SYS.REQ.CLAIMS.UPDATE`, signed by the
  operator) preloaded with the fixed accounts: `SYS`, `referee` (JetStream), `spectators`,
  `replay`, the same accounts and exports as bus/auth.py's static configuration;
- `referee.creds`, `spectator.creds`, `replay.creds`, `system.creds` and an env file each
  (`NATS_CREDS=`, `NATS_INBOX_PREFIX=`, `NATS_URL=`) for the services.

`Registrar(dir).register(name, user, checker, ...)` admits bot `name` (by the policy: open, an
invite code, or the operator's approval), makes account `agent-<name>` (bus/identity.py) exporting
only its turn, notify and discovery services and `botcheck-<name>` importing them, re-issues the
referee account with the new imports, pushes the three to the server, and returns the two user JWTs.
The bot's author made the user keys (`spielbus ladder register`, spielbus/register.py): seeds never
leave its machine; the registrar sees public keys only. `revoke(name)` re-issues the bot's accounts
with every user revoked (`revocations: {"*": now}`: the server closes their connections and refuses
them again) and the referee account without its imports; the name stays taken.

Every bot account carries the operator's limits (`BotLimits`: connections, subscriptions,
payload, data), on the account and on each user.

The bots' exports are public within this operator (no activation tokens): every account is
signed by the registrar, which gives the imports to `referee` and `botcheck-<name>` only, and no
bot holds an account key. The fixed accounts' exports (the match events, the stored reads) are
private, with activation tokens naming `spectators` and `replay`.

Limits: `registry.json` is the registrar's state and the operator's keys: one file, locked
(fcntl) around each change, on one machine; a lost file means a new operator (every login
re-issued). The referee account's JWT grows with every bot (4 imports, about 0.75 KiB, each), and is
re-issued at every registration: benchmarks/registry_scale.py (docs/ladder.md) measures it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bus import nats_jwt as J
from bus.auth import (
    PUBLIC_EVENTS,
    REPLAY_INBOX,
    SPECTATOR_INBOX,
    AuthError,
    agent_permissions,
    agent_services,
    botcheck_account,
    botcheck_permissions,
    referee_permissions,
    replay_permissions,
    spectator_api,
    spectator_permissions,
    spectator_reads,
    where_text,
    write_private,
)
from bus.connect import Login
from bus.identity import account_of
from bus.subjects import Subjects, check_agent_name
from bus.tls import TlsFiles, server_block

REGISTRY_FILE = "registry.json"
CONFIG_FILE = "nats-server.conf"
Status = Literal["active", "pending", "revoked"]


class BotLimits(BaseModel):
    """What every registered bot's account may use (the operator's; -1 is unlimited)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    conn: int = Field(default=4, ge=1, le=10_000, description="connections at once, the whole account")
    subs: int = Field(default=64, ge=1, le=100_000, description="subscriptions per connection")
    payload: int = Field(default=1024 * 1024, ge=1024, le=64 * 1024 * 1024, description="bytes per message")
    data: int = Field(default=-1, ge=-1, description="bytes a connection may have pending (-1: no limit)")


class Bot(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    name: str
    account_seed: str
    checker_seed: str
    user: str = Field(description="the bot's user public key (U...), made by its author")
    checker: str = Field(description="its bot-check user's public key")
    status: Status
    at: float


class Registry(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    prefix: str = "spielbus"
    url: str | None = None
    operator_seed: str
    system_seed: str
    referee_seed: str
    spectators_seed: str
    replay_seed: str
    limits: BotLimits = Field(default_factory=BotLimits)
    tls: TlsFiles | None = None
    bots: dict[str, Bot] = {}
    used_invites: dict[str, str] = Field(default={}, description="invite code -> the bot it admitted")

    def active(self) -> list[str]:
        return [n for n, b in self.bots.items() if b.status == "active"]


# -- the accounts' JWTs --------------------------------------------------------------------------

_UNLIMITED = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}
_JETSTREAM = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


def _service_kind(kind: str) -> str:
    return "Stream" if kind == "stream" else "Singleton"


def _referee_jwt(reg: Registry) -> str:
    s = Subjects(reg.prefix)
    referee = J.public_key(reg.referee_seed)
    exports: list[dict[str, Any]] = [
        {"name": e, "subject": s.match_all(e), "type": "stream", "token_req": True} for e in PUBLIC_EVENTS
    ]
    exports += [{"name": r, "subject": r, "type": "service", "token_req": True} for r in spectator_reads(s)]
    imports: list[dict[str, Any]] = []
    for name in reg.active():
        bot = reg.bots[name]
        exporter = J.public_key(bot.account_seed)
        # No activation token: the bots' exports are public within this operator (see `_agent_jwt`).
        imports += [
            {"name": subject, "subject": subject, "account": exporter, "type": "service"}
            for subject, _ in agent_services(name, s)
        ]
    nats = {"type": "account", "limits": {**_UNLIMITED, **_JETSTREAM}, "exports": exports, "imports": imports}
    return J.encode(referee, "referee", nats, reg.operator_seed)


def _spectators_jwt(reg: Registry) -> str:
    s = Subjects(reg.prefix)
    me = J.public_key(reg.spectators_seed)
    imports = [
        {
            "name": e,
            "subject": s.match_all(e),
            "account": J.public_key(reg.referee_seed),
            "token": J.activation_jwt(reg.referee_seed, me, s.match_all(e), "stream"),
            "type": "stream",
        }
        for e in PUBLIC_EVENTS
    ]
    nats = {"type": "account", "limits": _UNLIMITED, "imports": imports}
    return J.encode(me, "spectators", nats, reg.operator_seed)


def _replay_jwt(reg: Registry) -> str:
    s = Subjects(reg.prefix)
    me, api = J.public_key(reg.replay_seed), spectator_api(s)
    imports = [
        {
            "name": r,
            "subject": r,
            "local_subject": r.replace("$JS.API", api, 1),
            "account": J.public_key(reg.referee_seed),
            "token": J.activation_jwt(reg.referee_seed, me, r, "service"),
            "type": "service",
        }
        for r in spectator_reads(s)
    ]
    nats = {"type": "account", "limits": _UNLIMITED, "imports": imports}
    return J.encode(me, "replay", nats, reg.operator_seed)


def _system_jwt(reg: Registry) -> str:
    nats = {"type": "account", "limits": _UNLIMITED}
    return J.encode(J.public_key(reg.system_seed), "SYS", nats, reg.operator_seed)


def _bot_limits(limits: BotLimits) -> dict[str, Any]:
    return {
        **_UNLIMITED,
        "conn": limits.conn,
        "subs": limits.subs,
        "payload": limits.payload,
        "data": limits.data,
    }


def _revoked(bot: Bot) -> dict[str, Any]:
    return {"revocations": {"*": int(time.time()) + 1}} if bot.status == "revoked" else {}


def _agent_jwt(reg: Registry, bot: Bot) -> str:
    s = Subjects(reg.prefix)
    exports = [
        {
            "name": subj,
            "subject": subj,
            "type": "service",
            # Public within this operator: only accounts the registrar signs exist, and it gives the
            # import to `referee` and `botcheck-<name>` only. Private exports need one activation
            # token per import in the referee's JWT: 772 KiB and 3.6 s a registration at 200 bots
            # (benchmarks/registry_scale.py), past nats-server's 1 MB payload near 260.
            "response_type": _service_kind(k),
        }
        for subj, k in agent_services(bot.name, s)
    ]
    nats = {"type": "account", "limits": _bot_limits(reg.limits), "exports": exports, **_revoked(bot)}
    return J.encode(J.public_key(bot.account_seed), account_of(bot.name), nats, reg.operator_seed)


def _checker_jwt(reg: Registry, bot: Bot) -> str:
    s = Subjects(reg.prefix)
    me = J.public_key(bot.checker_seed)
    imports = [
        {
            "name": subj,
            "subject": subj,
            "account": J.public_key(bot.account_seed),
            "type": "service",
        }
        for subj, _ in agent_services(bot.name, s)
    ]
    nats = {"type": "account", "limits": _bot_limits(reg.limits), "imports": imports, **_revoked(bot)}
    return J.encode(me, botcheck_account(bot.name), nats, reg.operator_seed)


def _user_jwt(
    user: str, name: str, perms: dict[str, Any], account_seed: str, limits: BotLimits | None
) -> str:
    lim = {"subs": -1, "data": -1, "payload": -1}
    if limits is not None:
        lim = {"subs": limits.subs, "data": limits.data, "payload": limits.payload}
    nats = {"type": "user", **J.user_permissions(perms), **lim}
    return J.encode(user, name, nats, account_seed)


def bot_user_jwts(reg: Registry, name: str) -> tuple[str, str]:
    """The user JWTs of an active bot: (its own login, its bot-check login)."""
    bot = reg.bots[name]
    s = Subjects(reg.prefix)
    own = _user_jwt(bot.user, account_of(name), agent_permissions(name, s), bot.account_seed, reg.limits)
    check = _user_jwt(
        bot.checker, botcheck_account(name), botcheck_permissions(name, s), bot.checker_seed, reg.limits
    )
    return own, check


# -- the folder ------------------------------------------------------------------------------------


def load_registry(folder: str | Path) -> Registry:
    path = Path(folder) / REGISTRY_FILE
    try:
        return Registry.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AuthError(
            f"cannot read {path} (made by `spielbus auth init --registry`): {exc.strerror or exc}"
        ) from exc
    except ValueError as exc:
        raise AuthError(f"{path} is not a valid registry: {exc}") from exc


def is_registry(folder: str | Path) -> bool:
    return (Path(folder) / REGISTRY_FILE).is_file()


def service_login(folder: str | Path, who: Literal["referee", "system"]) -> Login:
    """`bus.connect` keyword arguments of a service of registry `folder`: its creds file, and the
    folder's CA when the bus has a private one (TLS). AuthError if `folder` is not a registry."""
    if not is_registry(folder):
        raise AuthError(
            f"{folder} is not a registry folder: make one with `spielbus auth init --registry --out {folder}`"
        )
    login: Login = {"creds": str(Path(folder) / f"{who}.creds")}
    tls = load_registry(folder).tls
    if tls is not None and tls.ca:
        login["tls_ca"] = tls.ca
    return login


def registered_names(folder: str | Path) -> list[str]:
    """The active registered bots (what the ladder's pool adds to its file's agents)."""
    return load_registry(folder).active()


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    with open(folder / ".registry.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _save(folder: Path, reg: Registry) -> None:
    tmp = folder / (REGISTRY_FILE + ".tmp")
    write_private(tmp, reg.model_dump_json(indent=2) + "\n")
    os.replace(tmp, folder / REGISTRY_FILE)


def _service_user(reg: Registry, seed_of_account: str, name: str, perms: dict[str, Any]) -> tuple[str, str]:
    seed = J.new_key("user")
    return J.creds_text(_user_jwt(J.public_key(seed), name, perms, seed_of_account, None), seed), seed


def render_server_config(reg: Registry, folder: Path) -> str:
    preload = {
        J.public_key(reg.system_seed): _system_jwt(reg),
        J.public_key(reg.referee_seed): _referee_jwt(reg),
        J.public_key(reg.spectators_seed): _spectators_jwt(reg),
        J.public_key(reg.replay_seed): _replay_jwt(reg),
    }
    conf: dict[str, Any] = {
        "operator": J.operator_jwt(reg.operator_seed, "spielbus", J.public_key(reg.system_seed)),
        "system_account": J.public_key(reg.system_seed),
        "resolver": {
            "type": "full",
            "dir": str((folder / "jwt").resolve()),
            "allow_delete": False,
            "interval": "2m",
            "timeout": "3s",
        },
        "resolver_preload": preload,
    }
    if reg.tls is not None:
        conf["tls"] = server_block(reg.tls)
    head = (
        "# nats-server configuration written by `spielbus auth init --registry`: operator mode,\n"
        "# bots' accounts added at run time by the registrar (bus/registry.py).\n"
        "# Start with `nats-server -js -c nats-server.conf`.\n"
    )
    return head + json.dumps(conf, indent=2) + "\n"


def _env(creds: Path, what: str, reg: Registry, inbox: str | None = None) -> str:
    text = f"# spielbus credentials: {what}\nNATS_CREDS={creds.resolve()}\n"
    if inbox:
        text += f"NATS_INBOX_PREFIX={inbox}\n"
    return text + where_text(reg.url, reg.tls.ca if reg.tls else None)


def init_registry(
    folder: str | Path,
    *,
    prefix: str = "spielbus",
    url: str | None = None,
    limits: BotLimits | None = None,
    force: bool = False,
    tls: TlsFiles | None = None,
) -> Registry:
    """Write an operator-mode folder (module docstring). Refuses an existing one unless `force`."""
    Subjects(prefix).turn("x")
    out = Path(folder)
    if (out / REGISTRY_FILE).exists() and not force:
        raise AuthError(
            f"{out} already holds a registry; pass --force to replace the operator and every login"
        )
    out.mkdir(parents=True, exist_ok=True)
    reg = Registry(
        prefix=prefix,
        url=url,
        operator_seed=J.new_key("operator"),
        system_seed=J.new_key("account"),
        referee_seed=J.new_key("account"),
        spectators_seed=J.new_key("account"),
        replay_seed=J.new_key("account"),
        limits=limits or BotLimits(),
        tls=tls,
    )
    _save(out, reg)
    write_private(out / CONFIG_FILE, render_server_config(reg, out))
    s = Subjects(prefix)
    services = [
        ("referee", reg.referee_seed, referee_permissions(s), None, "the referee"),
        ("spectator", reg.spectators_seed, spectator_permissions(s), SPECTATOR_INBOX, "read-only spectator"),
        ("replay", reg.replay_seed, replay_permissions(s), REPLAY_INBOX, "reader of the stored events"),
        ("system", reg.system_seed, {}, None, "the system account (the registrar pushes accounts with it)"),
    ]
    for name, account_seed, perms, inbox, what in services:
        creds, _ = _service_user(reg, account_seed, name, perms)
        write_private(out / f"{name}.creds", creds)
        write_private(out / f"{name}.env", _env(out / f"{name}.creds", what, reg, inbox))
    return reg


# -- registering -----------------------------------------------------------------------------------


class RegistrationError(ValueError):
    """A registration refused (the name taken, a bad invite, a bad key): the message says why."""


def _check_user_key(key: str, what: str) -> str:
    if not J.is_public_key(key, "user"):
        raise RegistrationError(f"{what} is not a NATS user public key (U..., 56 characters, checksummed)")
    return key


def account_jwts(reg: Registry, name: str) -> list[str]:
    """What to push for bot `name`, in order: its account, its bot-check account, the referee's."""
    bot = reg.bots[name]
    return [_agent_jwt(reg, bot), _checker_jwt(reg, bot), _referee_jwt(reg)]


def admit(
    folder: str | Path, name: str, user: str, checker: str, *, status: Status, invite: str | None = None
) -> tuple[Registry, Bot, bool]:
    """Record bot `name` (new, or the same keys again). Returns (registry, bot, changed)."""
    try:
        check_agent_name(name)
    except ValueError as exc:
        raise RegistrationError(str(exc)) from exc
    _check_user_key(user, "user")
    _check_user_key(checker, "checker")
    out = Path(folder)
    with _locked(out):
        reg = load_registry(out)
        old = reg.bots.get(name)
        if old is not None:
            if (old.user, old.checker) != (user, checker):
                raise RegistrationError(f"name {name!r} is taken")
            if old.status == "revoked":
                raise RegistrationError(f"bot {name!r} was revoked by the operator")
            return reg, old, False
        bot = Bot(
            name=name,
            account_seed=J.new_key("account"),
            checker_seed=J.new_key("account"),
            user=user,
            checker=checker,
            status=status,
            at=time.time(),
        )
        if invite is not None:
            if invite in reg.used_invites:  # checked again under the lock: two racing for one code
                raise RegistrationError("this invite code was used already")
            reg.used_invites[invite] = name
        reg.bots[name] = bot
        _save(out, reg)
        return reg, bot, True


def set_status(folder: str | Path, name: str, status: Status) -> Registry:
    """Approve (`active`) or revoke (`revoked`) bot `name`; AuthError if it is not registered."""
    out = Path(folder)
    with _locked(out):
        reg = load_registry(out)
        bot = reg.bots.get(name)
        if bot is None:
            raise AuthError(f"no bot {name!r} in {out / REGISTRY_FILE}")
        reg.bots[name] = bot.model_copy(update={"status": status, "at": time.time()})
        _save(out, reg)
        return reg


async def push(nc: Any, jwts: list[str], within_s: float = 5.0) -> None:
    """Send account JWTs to the server's resolver (`$SYS.REQ.CLAIMS.UPDATE`, as the system user);
    AuthError with the server's message if one is refused."""
    for token in jwts:
        msg = await nc.request("$SYS.REQ.CLAIMS.UPDATE", token.encode(), timeout=within_s)
        try:
            answer = json.loads(msg.data)
        except ValueError as exc:
            raise AuthError(
                f"the server's answer to a claims update is not JSON: {msg.data[:200]!r}"
            ) from exc
        if isinstance(answer, dict) and answer.get("error"):
            raise AuthError(f"the server refused account {J.decode(token).get('name')}: {answer['error']}")


# -- the registrar ---------------------------------------------------------------------------------

Policy = Literal["open", "invite", "approval"]


class RegistrationPolicy(BaseModel):
    """The ladder file's `[registration]` table: who may register a bot, and what a bot may use."""

    model_config = ConfigDict(strict=True, extra="forbid")

    policy: Policy = Field(
        description="open: anyone; invite: with one of `invites` (each once); approval: the operator's"
    )
    invites: list[str] = Field(
        default=[], max_length=100_000, description="invite codes, each admits one bot"
    )
    max_bots: int = Field(default=1000, ge=1, le=100_000, description="registrations at most (any status)")
    limits: BotLimits = Field(default_factory=BotLimits)


class Answer(BaseModel):
    """The registrar's answer to one registration (HTTP 200 active, 202 pending)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    status: Status
    name: str
    account: str = Field(description="the bot account's public key (A...)")
    prefix: str
    jwt: str | None = None
    checker_jwt: str | None = None
    url: str | None = Field(default=None, description="where the bot reaches NATS, if the registry knows")
    ca_pem: str | None = Field(default=None, description="the private CA of the server's TLS certificate")


class Registrar:
    """Admits bots into folder `folder` by `policy`, pushing their accounts through `nc` (a system
    account connection). One per folder (the folder's lock serialises its changes)."""

    def __init__(self, folder: str | Path, policy: RegistrationPolicy, nc: Any) -> None:
        self.folder, self.policy, self.nc = Path(folder), policy, nc
        # One change at a time in this process: `publish` holds the folder's (blocking) file lock
        # across its pushes, which a second coroutine of this process must not wait for.
        self._lock = asyncio.Lock()

    async def sync(self) -> int:
        """Apply the policy's limits to every registered bot and push every account (a registrar's
        start: a server whose resolver directory was lost gets them back). Returns bots pushed."""
        async with self._lock:
            return await self._sync()

    async def _sync(self) -> int:
        with _locked(self.folder):
            reg = load_registry(self.folder)
            if reg.limits != self.policy.limits:
                reg = reg.model_copy(update={"limits": self.policy.limits})
                _save(self.folder, reg)
            for name in reg.bots:
                await push(self.nc, account_jwts(reg, name)[:2])
            await push(self.nc, [_referee_jwt(reg)])
        return len(reg.bots)

    def _check_invite(self, reg: Registry, invite: str | None) -> None:
        if self.policy.policy != "invite":
            return
        if not invite or invite not in self.policy.invites:
            raise RegistrationError("this ladder admits bots by invite code: the code is missing or unknown")
        if invite in reg.used_invites:
            raise RegistrationError("this invite code was used already")

    async def register(self, name: str, user: str, checker: str, invite: str | None = None) -> Answer:
        async with self._lock:
            return await self._register(name, user, checker, invite)

    async def _register(self, name: str, user: str, checker: str, invite: str | None) -> Answer:
        reg = load_registry(self.folder)
        if reg.limits != self.policy.limits:  # the ladder file's limits changed: every bot gets them
            await self._sync()
            reg = load_registry(self.folder)
        known = reg.bots.get(name)
        if known is None:
            if len(reg.bots) >= self.policy.max_bots:
                raise RegistrationError(f"this ladder is full ({self.policy.max_bots} bots registered)")
            self._check_invite(reg, invite)
        status: Status = "pending" if self.policy.policy == "approval" else "active"
        code = invite if self.policy.policy == "invite" and known is None else None
        reg, bot, changed = admit(self.folder, name, user, checker, status=status, invite=code)
        if changed and bot.status == "active":
            reg = await publish(self.folder, name, self.nc)
        return answer(reg, name)


def answer(reg: Registry, name: str) -> Answer:
    bot = reg.bots[name]
    own, check = bot_user_jwts(reg, name) if bot.status == "active" else (None, None)
    account = J.public_key(bot.account_seed)
    ca = Path(reg.tls.ca).read_text(encoding="utf-8") if reg.tls is not None and reg.tls.ca else None
    return Answer(
        ca_pem=ca,
        status=bot.status,
        name=name,
        account=account,
        prefix=reg.prefix,
        jwt=own,
        checker_jwt=check,
        url=reg.url,
    )


async def change_status(folder: str | Path, name: str, status: Status, nc: Any) -> Registry:
    """`spielbus ladder approve|revoke NAME`: record it and push the bot's accounts and the referee's."""
    set_status(folder, name, status)
    return await publish(folder, name, nc)


async def publish(folder: str | Path, name: str, nc: Any) -> Registry:
    """Push bot `name`'s accounts and the referee's as the registry is now, holding its file lock, so
    that a referee account built before another process's change (a revoke, a registration) is
    never pushed after that change's own."""
    with _locked(Path(folder)):
        reg = load_registry(folder)
        await push(nc, account_jwts(reg, name))
    return reg
