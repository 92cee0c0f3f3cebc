"""NATS accounts for Spielbus: one user per agent, a bot-check user per agent, a referee user,
a read-only spectator user.

`write_auth(agents, out_dir)` (what `spielbus auth init` runs) writes into `out_dir`:

- `nats-server.conf`: an `authorization` block, one user per role with subject permissions;
- `auth.json`: every user, its role and password (for `spielbus run --auth`), mode 0600;
- `referee.env`, `spectator.env`, `agents/<name>.env`, `botcheck/<name>.env`: `NATS_USER=` /
  `NATS_PASSWORD=` lines (and `NATS_INBOX_PREFIX=` where the user has a private inbox),
  mode 0600, read by `bus.connect` (and by any bot) from the environment.

`login_for(dir, role, agent)` is the user a service logs in as with `--auth DIR`;
`ensure_auth` is `auth init --if-missing` (keep an existing folder: its passwords are in use).

Roles and what each may do (`P` is the subject prefix, `S` a Spielbus stream):

- agent `N` (user `agent-N`): subscribe only to `P.turn.N`, `P.notify.N` and the
  `$SRV` discovery subjects of service `N`; publish only replies to requests it
  received (`allow_responses`). No `_INBOX.>`: it could read every other agent's replies.
- referee (user `referee`): publish turn requests, notifications, match events, match
  specs and `$SRV` discovery requests; subscribe to `_INBOX.>` and match events; the
  JetStream API subjects it uses to create and read the two streams, never `$JS.API.>`
  (no stream delete, purge or update).
- bot-check of agent `N` (user `botcheck-N`, what a bot author runs `spielbus bot-check N`
  with): publish only turn requests and notifications to `N` and `N`'s `$SRV` discovery
  requests; subscribe only to its own inbox prefix `_INBOX_botcheck_N.>` (set `inbox_prefix`).
  It can neither publish match events or specs nor touch JetStream, nor talk to other agents.
- spectator (user `spectator`): subscribe to match events and its own inbox prefix
  `_INBOX_spectator.>` (set `inbox_prefix` in the client); read stored events one by one
  (`STREAM.MSG.GET`, `DIRECT.GET`) and the stream's info. No consumer API at all: a
  JetStream consumer's delivery subject is in the request body, which subject permissions
  cannot see, so a spectator allowed to create consumers could make the server deliver
  stored events into agents' turn and notify subjects (measured: it does). Follow the
  stream read-only with `bus.follow.follow_stream`.

Limits: user/password authentication in one (global) account, passwords stored in
plain text in files readable by the owner only; no nkeys, no JWT operator mode. A
change of agents means running `auth init` again (`--force`) and restarting the server.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from bus.subjects import Subjects, check_token

Role = Literal["agent", "referee", "spectator", "botcheck"]

REFEREE_USER = "referee"
SPECTATOR_USER = "spectator"
SPECTATOR_INBOX = "_INBOX_spectator"
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
        if self.role == "botcheck":
            return botcheck_inbox(self.agent or "")
        return None


class AuthBundle(BaseModel):
    """The manifest of an auth folder (`auth.json`)."""

    prefix: str = "spielbus"
    users: list[AuthUser]

    def referee(self) -> AuthUser:
        return self._only("referee")

    def spectator(self) -> AuthUser:
        return self._only("spectator")

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
    return f"agent-{check_token(name, 'agent name')}"


def botcheck_user(name: str) -> str:
    return f"botcheck-{check_token(name, 'agent name')}"


def botcheck_inbox(name: str) -> str:
    return f"_INBOX_botcheck_{check_token(name, 'agent name')}"


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
    check_token(name, "agent name")
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
    check_token(name, "agent name")
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


def referee_permissions(subjects: Subjects) -> dict[str, Any]:
    matches, schedule = _streams(subjects)
    p = subjects.prefix
    return {
        "publish": {
            "allow": [
                f"{p}.turn.*",
                f"{p}.notify.*",
                f"{p}.match.>",
                f"{p}.schedule",
                "$SRV.>",
                "$JS.API.INFO",
                f"$JS.API.STREAM.CREATE.{matches}",
                f"$JS.API.STREAM.CREATE.{schedule}",
                # A replayed spec first asks whether its match's `ended` record is already stored.
                f"$JS.API.STREAM.MSG.GET.{matches}",
                *_read_stream_api(matches),
                *_read_stream_api(schedule),
            ]
        },
        "subscribe": {
            "allow": [
                "_INBOX.>",
                f"{p}.match.>",
                # The collector learns of specs that failed for good (max deliveries, terminated).
                f"$JS.EVENT.ADVISORY.CONSUMER.*.{schedule}.*",
            ]
        },
    }


def spectator_permissions(subjects: Subjects) -> dict[str, Any]:
    matches, _ = _streams(subjects)
    read_only = [
        "$JS.API.INFO",
        f"$JS.API.STREAM.INFO.{matches}",
        f"$JS.API.STREAM.MSG.GET.{matches}",
        f"$JS.API.DIRECT.GET.{matches}",
        f"$JS.API.DIRECT.GET.{matches}.>",
    ]
    return {
        "publish": {"allow": read_only},
        "subscribe": {"allow": [f"{subjects.prefix}.match.>", f"{SPECTATOR_INBOX}.>"]},
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
    return spectator_permissions(subjects)


def render_config(bundle: AuthBundle) -> str:
    """The nats-server configuration text. JSON syntax is valid nats-server configuration."""
    subjects = Subjects(bundle.prefix)
    users = [
        {"user": u.user, "password": u.password, "permissions": permissions_for(u, subjects)}
        for u in bundle.users
    ]
    body = json.dumps({"authorization": {"users": users}}, indent=2)
    head = (
        "# nats-server configuration written by `spielbus auth init`: one user and one bot-check\n"
        "# user per agent, a referee and a read-only spectator.\n"
        "# Start with `nats-server -js -c nats-server.conf` (or `spielbus run --auth <folder>`).\n"
        "# Holds passwords: keep it private.\n"
    )
    return head + body + "\n"


def _env_text(user: AuthUser, what: str) -> str:
    text = f"# spielbus credentials: {what}\nNATS_USER={user.user}\nNATS_PASSWORD={user.password}\n"
    inbox = user.inbox_prefix()
    if inbox:
        text += f"NATS_INBOX_PREFIX={inbox}\n"
    return text


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path, 0o600)  # O_CREAT's mode does not apply to a file that already existed


def make_bundle(agents: list[str], prefix: str = "spielbus") -> AuthBundle:
    names = list(dict.fromkeys(check_token(a, "agent name") for a in agents))
    if not names:
        raise AuthError("no agents given")

    def pw() -> str:
        return secrets.token_urlsafe(24)

    users = [
        AuthUser(role="referee", user=REFEREE_USER, password=pw()),
        AuthUser(role="spectator", user=SPECTATOR_USER, password=pw()),
        *(AuthUser(role="agent", user=agent_user(n), password=pw(), agent=n) for n in names),
        *(AuthUser(role="botcheck", user=botcheck_user(n), password=pw(), agent=n) for n in names),
    ]
    return AuthBundle(prefix=prefix, users=users)


def write_auth(
    agents: list[str], out_dir: str | Path, *, prefix: str = "spielbus", force: bool = False
) -> AuthBundle:
    """Write a fresh auth folder. Refuses to overwrite one unless `force` (new passwords break old bots)."""
    Subjects(prefix).turn("x")  # validates the prefix shape early
    out = Path(out_dir)
    if (out / MANIFEST_FILE).exists() and not force:
        raise AuthError(f"{out} already holds an auth folder; pass --force to replace every password")
    bundle = make_bundle(agents, prefix)
    out.mkdir(parents=True, exist_ok=True)
    _write_private(out / CONFIG_FILE, render_config(bundle))
    _write_private(out / MANIFEST_FILE, bundle.model_dump_json(indent=2) + "\n")
    _write_private(out / "referee.env", _env_text(bundle.referee(), "the referee"))
    _write_private(out / "spectator.env", _env_text(bundle.spectator(), "read-only spectator"))
    for u in bundle.users:
        if u.role == "agent":
            _write_private(out / "agents" / f"{u.agent}.env", _env_text(u, f"agent {u.agent}"))
        if u.role == "botcheck":
            what = f"`spielbus bot-check {u.agent}` (asks only agent {u.agent})"
            _write_private(out / "botcheck" / f"{u.agent}.env", _env_text(u, what))
    return bundle


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
        return bundle.referee() if role == "referee" else bundle.spectator()
    except AuthError as exc:
        raise AuthError(f"{out_dir}: {exc}") from exc


def ensure_auth(
    agents: list[str], out_dir: str | Path, *, prefix: str = "spielbus"
) -> tuple[AuthBundle, bool]:
    """`auth init --if-missing`: keep an existing folder (its passwords are in use) if it has a
    user for every agent and the same prefix; otherwise write a fresh one. Returns (bundle, written)."""
    if not (Path(out_dir) / MANIFEST_FILE).exists():
        return write_auth(agents, out_dir, prefix=prefix), True
    bundle = load_auth(out_dir)
    if bundle.prefix != prefix:
        raise AuthError(f"{out_dir} is for subject prefix {bundle.prefix!r}, not {prefix!r}; use --force")
    try:
        for name in agents:
            bundle.agent(name)
    except AuthError as exc:
        raise AuthError(f"{out_dir}: {exc}") from exc
    return bundle, False
