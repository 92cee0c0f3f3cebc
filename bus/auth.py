"""NATS accounts for Spielbus: one account per party, and only what is exported crosses.

`write_auth(agents, out_dir)` (what `spielbus auth init` runs) writes into `out_dir`:

- `nats-server.conf`: an `accounts` block (below), one user per account role;
- `auth.json`: every user, its role and password (for `spielbus run --auth`), mode 0600;
- `referee.env`, `spectator.env`, `replay.env`, `botcheck/<name>.env` and `agents/<name>.env`, the bot's one
  login file: `NATS_USER=` / `NATS_PASSWORD=` lines (and `NATS_INBOX_PREFIX=` where the user has
  a private inbox), mode 0600, read by `bus.connect` (and by any bot) from the environment. A
  bot's file also holds its bot-check login (`SPIELBUS_BOTCHECK_*`), so its author needs that
  one file for both the bot and `spielbus bot-check NAME --login FILE`.

`login_for(dir, role, agent)` is the user a service logs in as with `--auth DIR`;
`ensure_auth` is `auth init --if-missing` (keep an existing folder: its passwords are in use;
bot-check users missing from an older folder are added and the server configuration is
written again from the manifest, every password kept).

Accounts (`P` is the subject prefix, `M` the match stream, `N` an agent). Every account is its
own subject namespace: a subject published in one is heard only there, unless one account
exports it and another imports it. A service import's reply is routed back by the server
through a subject of its own making, so no importer can choose where an answer lands (user
permissions in one shared account cannot give that: reply subjects are invisible to them,
and a bot-check login could relay an agent's answer onto the JetStream API).

- `referee` (user `referee`): the only account with JetStream; the referee workers, `run`,
  `submit` and the collector. Imports from each `agent-N`: the services `P.turn.N`,
  `P.notify.N` and `$SRV.*.N`, `$SRV.*.N.*` (nats.micro discovery). Exports to `spectators`:
  the streams `P.match.*.started|moved|forfeit|ended` and the read-only services
  `$JS.API.STREAM.MSG.GET.M` and `$JS.API.STREAM.INFO.M`. Only this account can write a
  match event or a record, or claim a `Nats-Msg-Id` in a stream. Its users may answer the
  discovery subjects of the workers' own service `spielbus-referee` (inside this account).
  Exports the two read services to `replay`, not to `spectators`.
- `agent-N` (user `agent-N`): exports those four services, to `referee` and `botcheck-N`
  only; imports only its own two subjects of the provider limiter, which the `referee`
  account serves (`_add_llm_limits`), so nothing else its user publishes leaves the account
  except answers to requests it was sent.
- `botcheck-N` (user `botcheck-N`, what `spielbus bot-check N` logs in as): imports the
  four services of `agent-N`, nothing else. Its inbox is its own account's.
- `spectators` (user `spectator`): imports the match event streams, nothing else; its user
  subscribes to `P.match.>` and publishes nothing. With no service import in the account, no
  answer of any service can land there: a requester names its answer's subject freely inside
  its own account, so an account holding requests and the event feed together let one
  spectator aim JetStream's answers at `P.match.<any>.ended`, where the others listen.
- `replay` (user `replay`): the stored events' readers. Imports the two read services, under
  `P.replay.API.` (`spectator_api(subjects)`: JetStream's own `$JS.API.` subjects answer
  "JetStream not enabled" in an account without JetStream, before an import is consulted);
  subscribes only to its inbox `_INBOX_replay.>`. Follow stored events with
  `bus.follow.follow_stream(spectator_nc, ..., reads=replay_nc, api_prefix=spectator_api(subjects))`.
  Limit: readers share this account, so a reader could aim an answer (a stored public event)
  at another reader's inbox if it learnt its random name; nothing else listens there.

Users keep narrow subject permissions inside their accounts as a second wall (an agent
subscribes only to its own subjects and publishes only replies; no user may delete or purge
a stream; a spectator creates no consumer, whose delivery subject sits in the request body).

Limits: static accounts with user/password logins in the server configuration, passwords
in plain text in files readable by the owner only; no nkeys, no JWT operator mode (static
accounts need no resolver and keep `auth init` one command; the price is a server reload
or restart when agents change: run `auth init` again with `--force`).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bus.files import write_private
from bus.identity import account_of
from bus.subjects import LADDER_BUCKET, REFEREE_SERVICE, Subjects, check_agent_name
from bus.tls import TlsFiles, server_block

Role = Literal["agent", "referee", "spectator", "botcheck", "replay"]

REFEREE_USER = "referee"
SPECTATOR_USER = "spectator"
SPECTATOR_INBOX = "_INBOX_spectator"
REPLAY_USER = "replay"
REPLAY_INBOX = "_INBOX_replay"
CONFIG_FILE = "nats-server.conf"
MANIFEST_FILE = "auth.json"


class AuthError(ValueError):
    """A missing, unreadable or incomplete auth folder."""


class AuthUser(BaseModel):
    role: Role
    user: str
    password: str
    agent: str | None = Field(default=None, description="roles `agent`, `botcheck`: the agent name")

    def inbox_prefix(self) -> str | None:
        """The private inbox prefix this user must set in its client, if any (`_INBOX.>` is not given)."""
        if self.role == "spectator":
            return SPECTATOR_INBOX
        if self.role == "replay":
            return REPLAY_INBOX
        if self.role == "botcheck":
            return botcheck_inbox(self.agent or "")
        return None


class AuthBundle(BaseModel):
    """The manifest of an auth folder (`auth.json`)."""

    prefix: str = "spielbus"
    users: list[AuthUser]
    url: str | None = Field(
        default=None,
        description="where clients reach the server (`auth init --nats`): each login file's NATS_URL",
    )
    tls: TlsFiles | None = Field(
        default=None, description="the server's TLS files (`auth init --tls-*`): its `tls {}` block"
    )

    def ca(self) -> str | None:
        """The CA file clients verify the server with (each login file's NATS_TLS_CA), if any."""
        return self.tls.ca if self.tls is not None else None

    def referee(self) -> AuthUser:
        return self._only("referee")

    def spectator(self) -> AuthUser:
        return self._only("spectator")

    def replay(self) -> AuthUser:
        return self._only("replay")

    def _only(self, role: Role) -> AuthUser:
        # An AuthError, not StopIteration: a bare `next()` inside a coroutine becomes a RuntimeError.
        for u in self.users:
            if u.role == role:
                return u
        raise AuthError(f"no {role} user in this auth folder: run `spielbus auth init --force`")

    def botcheck(self, name: str) -> AuthUser:
        for u in self.users:
            if u.role == "botcheck" and u.agent == name:
                return u
        raise AuthError(
            f"agent {name!r} has no bot-check user in this auth folder (written before bot-check "
            "users existed, or without this agent): run `spielbus auth init --force`"
        )

    def agent(self, name: str) -> AuthUser:
        for u in self.users:
            if u.role == "agent" and u.agent == name:
                return u
        raise AuthError(
            f"agent {name!r} has no user in this auth folder: run `spielbus auth init --force` "
            "with every agent of the tournament"
        )


def agent_user(name: str) -> str:
    """Agent users are prefixed so that no agent name can collide with `referee` or `spectator`."""
    return f"agent-{check_agent_name(name)}"


def botcheck_user(name: str) -> str:
    return f"botcheck-{check_agent_name(name)}"


def botcheck_inbox(name: str) -> str:
    return f"_INBOX_botcheck_{check_agent_name(name)}"


def _streams(subjects: Subjects) -> tuple[str, str]:
    return subjects.matches_stream, subjects.schedule_stream


def _read_stream_api(stream: str) -> list[str]:
    """JetStream API subjects to read one stream through consumers (ephemeral or durable)."""
    return [
        f"$JS.API.STREAM.INFO.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}",
        f"$JS.API.CONSUMER.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.DURABLE.CREATE.{stream}.>",
        f"$JS.API.CONSUMER.INFO.{stream}.>",
        f"$JS.API.CONSUMER.DELETE.{stream}.>",
        f"$JS.API.CONSUMER.MSG.NEXT.{stream}.>",
        f"$JS.ACK.{stream}.>",
        # Flow-control replies of push consumers (nats-py's ordered consumer uses them).
        f"$JS.FC.{stream}.>",
    ]


def agent_permissions(name: str, subjects: Subjects) -> dict[str, Any]:
    check_agent_name(name)
    return {
        "publish": {"deny": [">"]},
        "subscribe": {
            "allow": [
                subjects.turn(name),
                subjects.notify(name),
                # nats.micro discovery: `$SRV.PING`, `$SRV.PING.<name>`, `$SRV.PING.<name>.<id>`.
                "$SRV.PING",
                "$SRV.INFO",
                "$SRV.STATS",
                f"$SRV.*.{name}",
                f"$SRV.*.{name}.*",
            ]
        },
        # One reply per request received, and nothing else: an agent answers, it never publishes.
        "allow_responses": True,
    }


def botcheck_permissions(name: str, subjects: Subjects) -> dict[str, Any]:
    """`spielbus bot-check N` as a bot author runs it: ask `N` and nobody else, publish nothing else."""
    check_agent_name(name)
    return {
        "publish": {
            "allow": [
                subjects.turn(name),
                subjects.notify(name),
                f"$SRV.*.{name}",
                f"$SRV.*.{name}.*",
            ]
        },
        "subscribe": {"allow": [f"{botcheck_inbox(name)}.>"]},
    }


def _ladder_bucket_api() -> list[str]:
    """The ladder's key-value bucket (`spielbus ladder`, referee/ladder/store.py): create it, write
    and purge keys, read them (direct get, and the key listing's ordered consumer)."""
    stream = f"KV_{LADDER_BUCKET}"
    return [
        f"$JS.API.STREAM.CREATE.{stream}",
        f"$JS.API.STREAM.MSG.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}",
        f"$JS.API.DIRECT.GET.{stream}.>",
        f"$KV.{LADDER_BUCKET}.>",
        *_read_stream_api(stream),
    ]


def referee_permissions(subjects: Subjects) -> dict[str, Any]:
    matches, schedule = _streams(subjects)
    p = subjects.prefix
    return {
        "publish": {
            "allow": [
                f"{p}.turn.*",
                f"{p}.notify.*",
                f"{p}.match.>",
                # `spielbus analyst` run with the referee's login publishes its live verdicts.
                f"{p}.analysis.*",
                f"{p}.schedule",
                "$SRV.>",
                "$JS.API.INFO",
                f"$JS.API.STREAM.CREATE.{matches}",
                f"$JS.API.STREAM.CREATE.{schedule}",
                # A replayed spec first asks whether its match's `ended` record is already stored.
                f"$JS.API.STREAM.MSG.GET.{matches}",
                *_read_stream_api(matches),
                *_read_stream_api(schedule),
                *_ladder_bucket_api(),
            ]
        },
        "subscribe": {
            "allow": [
                "_INBOX.>",
                f"{p}.match.>",
                # The run's own live feed hears the analyst's verdicts.
                f"{p}.analysis.*",
                # The collector learns of specs that failed for good (max deliveries, terminated).
                f"$JS.EVENT.ADVISORY.CONSUMER.*.{schedule}.*",
                # Each worker is the nats.micro service REFEREE_SERVICE (referee/service.py).
                "$SRV.PING",
                "$SRV.INFO",
                "$SRV.STATS",
                f"$SRV.*.{REFEREE_SERVICE}",
                f"$SRV.*.{REFEREE_SERVICE}.*",
            ]
        },
        # Replies to the discovery requests it receives (from its own account's users).
        "allow_responses": True,
    }


def spectator_api(subjects: Subjects) -> str:
    """The JetStream API prefix a spectator reads the match stream with (`js = nc.jetstream(prefix=...)`):
    the `spectators` account imports the two read services under it (see the module docstring)."""
    return f"{subjects.prefix}.replay.API"


def spectator_reads(subjects: Subjects) -> list[str]:
    """The JetStream API subjects a spectator may ask, as the `referee` account exports them."""
    matches, _ = _streams(subjects)
    return [f"$JS.API.STREAM.MSG.GET.{matches}", f"$JS.API.STREAM.INFO.{matches}"]


def spectator_permissions(subjects: Subjects) -> dict[str, Any]:
    """The live feed only: hear the match events, publish nothing (so ask nothing)."""
    p = subjects.prefix
    return {"publish": {"deny": [">"]}, "subscribe": {"allow": [f"{p}.match.>", subjects.analysis_all()]}}


def replay_permissions(subjects: Subjects) -> dict[str, Any]:
    """The stored events' reader: ask the two read services, hear its own inbox."""
    api = spectator_api(subjects)
    return {
        "publish": {"allow": [s.replace("$JS.API", api, 1) for s in spectator_reads(subjects)]},
        "subscribe": {"allow": [f"{REPLAY_INBOX}.>"]},
    }


def permissions_for(user: AuthUser, subjects: Subjects) -> dict[str, Any]:
    if user.role == "agent":
        assert user.agent is not None
        return agent_permissions(user.agent, subjects)
    if user.role == "botcheck":
        assert user.agent is not None
        return botcheck_permissions(user.agent, subjects)
    if user.role == "referee":
        return referee_permissions(subjects)
    if user.role == "replay":
        return replay_permissions(subjects)
    return spectator_permissions(subjects)


# What one bot's login may hold at once (nats-server's account `limits`), so a hostile login cannot
# exhaust the server (one login opened 500 of 500 connections before): room for a bot, its replicas
# and a reconnect, each with the dozen subscriptions an agent service makes.
AGENT_ACCOUNT_LIMITS = {"max_connections": 16, "max_subscriptions": 1024, "max_payload": 1024 * 1024}
REFEREE_ACCOUNT = "referee"
SPECTATORS_ACCOUNT = "spectators"
REPLAY_ACCOUNT = "replay"
PUBLIC_EVENTS = ("started", "moved", "forfeit", "ended")


def agent_account(name: str) -> str:
    return account_of(name)  # the identity the ladder keys on (bus/identity.py)


def botcheck_account(name: str) -> str:
    return f"botcheck-{check_agent_name(name)}"


def agent_services(name: str, subjects: Subjects) -> list[tuple[str, str]]:
    """(subject, response type) of the services agent account `name` exports: its turns (one answer
    each), its notifications (no answer) and nats.micro discovery (`$SRV.PING.N` is answered by
    every replica of the agent: a stream of answers)."""
    return [
        (subjects.turn(name), "singleton"),
        (subjects.notify(name), "singleton"),
        (f"$SRV.*.{name}", "stream"),
        (f"$SRV.*.{name}.*", "stream"),
    ]


def render_accounts(bundle: AuthBundle) -> dict[str, Any]:
    """The `accounts` block of the server configuration (see the module docstring)."""
    subjects = Subjects(bundle.prefix)

    def users(role: Role, agent: str | None = None) -> list[dict[str, Any]]:
        return [
            {"user": u.user, "password": u.password, "permissions": permissions_for(u, subjects)}
            for u in bundle.users
            if u.role == role and u.agent == agent
        ]

    agents = [u.agent for u in bundle.users if u.role == "agent" and u.agent]
    referee_imports: list[dict[str, Any]] = []
    accounts: dict[str, Any] = {}
    for name in agents:
        imports = [
            {"service": {"account": agent_account(name), "subject": subject}}
            for subject, _ in agent_services(name, subjects)
        ]
        referee_imports += imports
        importers = [REFEREE_ACCOUNT, botcheck_account(name)]
        accounts[agent_account(name)] = {
            "users": users("agent", name),
            "limits": dict(AGENT_ACCOUNT_LIMITS),
            "exports": [
                {"service": subject, "response_type": kind, "accounts": importers}
                for subject, kind in agent_services(name, subjects)
            ],
        }
        accounts[botcheck_account(name)] = {
            "users": users("botcheck", name),
            "imports": imports,
            "limits": dict(AGENT_ACCOUNT_LIMITS),
        }
    reads = spectator_reads(subjects)
    # The analyst's live verdicts judge perfect-information games only, so they are as public as the moves.
    events = [*(subjects.match_all(e) for e in PUBLIC_EVENTS), subjects.analysis_all()]
    accounts[REFEREE_ACCOUNT] = {
        "jetstream": "enabled",
        "users": users("referee"),
        "exports": [
            *({"stream": e, "accounts": [SPECTATORS_ACCOUNT]} for e in events),
            *({"service": r, "accounts": [REPLAY_ACCOUNT]} for r in reads),
        ],
        "imports": referee_imports,
    }
    api = spectator_api(subjects)
    # The feed and the reads in two accounts: no answer can be aimed where the feed is heard.
    accounts[SPECTATORS_ACCOUNT] = {
        "users": users("spectator"),
        "imports": [{"stream": {"account": REFEREE_ACCOUNT, "subject": e}} for e in events],
    }
    accounts[REPLAY_ACCOUNT] = {
        "users": users("replay"),
        "imports": [
            {"service": {"account": REFEREE_ACCOUNT, "subject": r}, "to": r.replace("$JS.API", api, 1)}
            for r in reads
        ],
    }
    _add_llm_limits(accounts, agents, subjects)
    return accounts


def _add_llm_limits(accounts: dict[str, Any], agents: list[str], subjects: Subjects) -> None:
    """The provider limiter (agents/llm/limits.py) serves in the `referee` account on
    `P.llm.limits.acquire.N` and `P.llm.limits.release.N`. Each agent account imports its own two
    subjects only, so the agent token is the server's word: no agent can ask, or free a lease, as
    another. The agent's user may publish those two and hear its own account's `_INBOX.>` (the
    limiter's answers, routed back by the server)."""
    p = subjects.prefix
    referee = accounts[REFEREE_ACCOUNT]
    for u in referee["users"]:
        u["permissions"]["subscribe"]["allow"].append(f"{p}.llm.limits.*.*")
    for name in agents:
        own = [f"{p}.llm.limits.acquire.{name}", f"{p}.llm.limits.release.{name}"]
        referee["exports"] += [{"service": s, "accounts": [agent_account(name)]} for s in own]
        account = accounts[agent_account(name)]
        account["imports"] = [{"service": {"account": REFEREE_ACCOUNT, "subject": s}} for s in own]
        for u in account["users"]:
            u["permissions"]["publish"] = {"allow": own}
            u["permissions"]["subscribe"]["allow"].append("_INBOX.>")


def render_config(bundle: AuthBundle) -> str:
    """The nats-server configuration text. JSON syntax is valid nats-server configuration."""
    conf: dict[str, Any] = {"accounts": render_accounts(bundle)}
    if bundle.tls is not None:  # clients must speak TLS (`auth init --tls-*`, bus/tls.py)
        conf["tls"] = server_block(bundle.tls)
    body = json.dumps(conf, indent=2)
    head = (
        "# nats-server configuration written by `spielbus auth init`: one account per party (the\n"
        "# referee, with JetStream; each agent; each agent's bot-check; the spectators; the replay\n"
        "# readers), see bus/auth.py.\n"
        "# Start with `nats-server -js -c nats-server.conf` (or `spielbus run --auth <folder>`).\n"
        "# Holds passwords: keep it private.\n"
    )
    return head + body + "\n"


def _env_text(user: AuthUser, what: str, url: str | None = None, ca: str | None = None) -> str:
    text = f"# spielbus credentials: {what}\nNATS_USER={user.user}\nNATS_PASSWORD={user.password}\n"
    inbox = user.inbox_prefix()
    if inbox:
        text += f"NATS_INBOX_PREFIX={inbox}\n"
    return text + where_text(url, ca)


def where_text(url: str | None, ca: str | None) -> str:
    """The `NATS_URL=` and `NATS_TLS_CA=` lines of a login file (each only when known)."""
    return (f"NATS_URL={url}\n" if url else "") + (f"NATS_TLS_CA={ca}\n" if ca else "")


BOTCHECK_ENV = ("SPIELBUS_BOTCHECK_USER", "SPIELBUS_BOTCHECK_PASSWORD", "SPIELBUS_BOTCHECK_INBOX")
# A registered bot's bot-check login is a creds file (`spielbus ladder register`, bus/registry.py).
BOTCHECK_CREDS = "SPIELBUS_BOTCHECK_CREDS"


def bot_login_text(bundle: AuthBundle, name: str, url: str | None = None) -> str:
    """The one login file of bot `name`'s author: the bot's own login (`NATS_USER`, `NATS_PASSWORD`,
    and `NATS_URL` when given) and its bot-check login (`SPIELBUS_BOTCHECK_*`, what `spielbus
    bot-check NAME --login FILE` uses). Both reach only this bot's own account (module docstring)."""
    text = _env_text(bundle.agent(name), f"bot {name} (keep it private)", url or bundle.url, bundle.ca())
    try:
        check = bundle.botcheck(name)
    except AuthError:  # a folder from before bot-check users: the bot's own login still works
        return text
    values = (check.user, check.password, check.inbox_prefix() or "")
    return text + "".join(f"{k}={v}\n" for k, v in zip(BOTCHECK_ENV, values, strict=True))


def read_login_file(path: str | Path) -> dict[str, str]:
    """`KEY=VALUE` lines of a login file (comments and blank lines skipped); AuthError if unreadable."""
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise AuthError(f"cannot read login file {path}: {exc}") from exc
    out = {}
    for line in lines:
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            out[key.strip()] = value.strip()
    if not {"NATS_USER", "NATS_CREDS", BOTCHECK_ENV[0], BOTCHECK_CREDS} & out.keys():
        raise AuthError(f"{path} holds no login (NATS_USER=...): is it a `spielbus auth init` file?")
    return out


def make_bundle(
    agents: list[str], prefix: str = "spielbus", url: str | None = None, tls: TlsFiles | None = None
) -> AuthBundle:
    names = list(dict.fromkeys(check_agent_name(a) for a in agents))
    if not names:
        raise AuthError("no agents given")

    def pw() -> str:
        return secrets.token_urlsafe(24)

    users = [
        AuthUser(role="referee", user=REFEREE_USER, password=pw()),
        AuthUser(role="spectator", user=SPECTATOR_USER, password=pw()),
        AuthUser(role="replay", user=REPLAY_USER, password=pw()),
        *(AuthUser(role="agent", user=agent_user(n), password=pw(), agent=n) for n in names),
        *(AuthUser(role="botcheck", user=botcheck_user(n), password=pw(), agent=n) for n in names),
    ]
    return AuthBundle(prefix=prefix, users=users, url=url, tls=tls)


def write_auth(
    agents: list[str],
    out_dir: str | Path,
    *,
    prefix: str = "spielbus",
    force: bool = False,
    url: str | None = None,
    tls: TlsFiles | None = None,
) -> AuthBundle:
    """Write a fresh auth folder. Refuses to overwrite one unless `force` (new passwords break old bots).
    `url`: the server's address for clients, written into every login file as NATS_URL."""
    Subjects(prefix).turn("x")  # validates the prefix shape early
    out = Path(out_dir)
    if (out / MANIFEST_FILE).exists() and not force:
        raise AuthError(f"{out} already holds an auth folder; pass --force to replace every password")
    bundle = make_bundle(agents, prefix, url, tls)
    _write_bundle(bundle, out)
    return bundle


def _write_bundle(bundle: AuthBundle, out: Path, only: list[AuthUser] | None = None) -> None:
    """The config, the manifest, and the env files of `only` (default: every user)."""
    out.mkdir(parents=True, exist_ok=True)
    write_private(out / CONFIG_FILE, render_config(bundle))
    write_private(out / MANIFEST_FILE, bundle.model_dump_json(indent=2) + "\n")
    for u in bundle.users if only is None else only:
        if u.role == "referee":
            write_private(out / "referee.env", _env_text(u, "the referee", bundle.url, bundle.ca()))
        elif u.role == "spectator":
            what = "read-only spectator (the live events)"
            write_private(out / "spectator.env", _env_text(u, what, bundle.url, bundle.ca()))
        elif u.role == "replay":
            what = "read-only reader of the stored match events"
            write_private(out / "replay.env", _env_text(u, what, bundle.url, bundle.ca()))
        elif u.role == "agent" and u.agent:
            write_private(out / "agents" / f"{u.agent}.env", bot_login_text(bundle, u.agent))
        elif u.agent:
            what = f"`spielbus bot-check {u.agent}` (asks only agent {u.agent})"
            write_private(out / "botcheck" / f"{u.agent}.env", _env_text(u, what, bundle.url, bundle.ca()))
            # The bot's own file carries its bot-check login too (one file for its author).
            write_private(out / "agents" / f"{u.agent}.env", bot_login_text(bundle, u.agent))


def load_auth(out_dir: str | Path) -> AuthBundle:
    path = Path(out_dir) / MANIFEST_FILE
    try:
        return AuthBundle.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise AuthError(f"cannot read {path} (made by `spielbus auth init`): {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise AuthError(f"{path} is not a valid auth manifest: {exc}") from exc


def config_path(out_dir: str | Path) -> Path:
    return Path(out_dir) / CONFIG_FILE


def user_env(user: AuthUser) -> dict[str, str]:
    """Environment variables that make `bus.connect` (and the example bots) log in as `user`."""
    env = {"NATS_USER": user.user, "NATS_PASSWORD": user.password}
    inbox = user.inbox_prefix()
    if inbox:
        env["NATS_INBOX_PREFIX"] = inbox
    return env


def login_for(
    out_dir: str | Path, role: Role, agent: str | None = None, prefix: str | None = None
) -> AuthUser:
    """The user a service logs in as (`--auth DIR`), with an error naming the folder when it is missing.

    `prefix`: the subject prefix the service uses; a folder written for another prefix would
    log in fine and then be refused every subject, so it is refused here instead.
    """
    bundle = load_auth(out_dir)
    if prefix is not None and bundle.prefix != prefix:
        raise AuthError(f"{out_dir} is for subject prefix {bundle.prefix!r}, not {prefix!r}")
    try:
        if role == "agent":
            return bundle.agent(agent or "")
        if role == "botcheck":
            return bundle.botcheck(agent or "")
        if role == "replay":
            return bundle.replay()
        return bundle.referee() if role == "referee" else bundle.spectator()
    except AuthError as exc:
        raise AuthError(f"{out_dir}: {exc}") from exc


def ensure_auth(
    agents: list[str],
    out_dir: str | Path,
    *,
    prefix: str = "spielbus",
    url: str | None = None,
    tls: TlsFiles | None = None,
) -> tuple[AuthBundle, bool]:
    """`auth init --if-missing`: keep an existing folder (its passwords are in use) if it has a
    user for every agent and the same prefix; otherwise write a fresh one. Returns (bundle, written).
    A `url` other than the folder's is written into its login files, every password kept."""
    bundle, written = _ensure_users(agents, out_dir, prefix, url)
    changed = {k: v for k, v in (("url", url), ("tls", tls)) if v is not None and v != getattr(bundle, k)}
    if changed:
        bundle = bundle.model_copy(update=changed)
        _write_bundle(bundle, Path(out_dir))
        written = True
    return bundle, written


def _ensure_users(
    agents: list[str], out_dir: str | Path, prefix: str, url: str | None
) -> tuple[AuthBundle, bool]:
    if not (Path(out_dir) / MANIFEST_FILE).exists():
        return write_auth(agents, out_dir, prefix=prefix, url=url), True
    bundle = load_auth(out_dir)
    if bundle.prefix != prefix:
        raise AuthError(f"{out_dir} is for subject prefix {bundle.prefix!r}, not {prefix!r}; use --force")
    try:
        for name in agents:
            bundle.agent(name)
    except AuthError as exc:
        raise AuthError(f"{out_dir}: {exc}") from exc
    missing = [
        u.agent
        for u in bundle.users
        if u.role == "agent"
        and u.agent
        and not any(b.role == "botcheck" and b.agent == u.agent for b in bundle.users)
    ]
    if not any(u.role == "replay" for u in bundle.users):
        # A folder from before the stored events' readers had an account of their own.
        reader = AuthUser(role="replay", user=REPLAY_USER, password=secrets.token_urlsafe(24))
        bundle = bundle.model_copy(update={"users": [*bundle.users, reader]})
        _write_bundle(bundle, Path(out_dir), only=[reader])
    if not missing:
        conf = config_path(out_dir)
        if conf.exists() and conf.read_text(encoding="utf-8") == render_config(bundle):
            return bundle, False
        # A folder from before accounts (one shared account): the same passwords, in accounts.
        _write_bundle(bundle, Path(out_dir), only=[])
        return bundle, True
    # A folder from before bot-check users existed: add them, keeping every password in use.
    added = [
        AuthUser(role="botcheck", user=botcheck_user(n), password=secrets.token_urlsafe(24), agent=n)
        for n in missing
    ]
    bundle = bundle.model_copy(update={"users": [*bundle.users, *added]})
    _write_bundle(bundle, Path(out_dir), only=added)
    return bundle, True
