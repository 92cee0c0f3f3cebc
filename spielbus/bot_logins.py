"""Secure by default: `spielbus run` with an external agent on its embedded server uses accounts.

An external bot is a process nobody here started, so the embedded server cannot stay open: any
local process could answer another agent's turns first, or publish a record. When a tournament
has an external agent, `spielbus run` starts its embedded server without `--auth` and without
`--nats`, it writes an auth folder into the run folder (`<run folder>/auth`, the accounts of
`bus.auth`; a resumed run keeps the folder's passwords), and once the server is up it rewrites
each external bot's login file there with the server's URL and prints the one command its
author runs. A run with only built-in agents may stay open: every process on that bus is
ours. With `--auth DIR` the operator's folder is used as it is (its files are not rewritten).

Limits: the embedded server listens on 127.0.0.1 only, so an external bot of an embedded run
runs on this machine; bots elsewhere need `--nats` and a server the operator starts.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from bus.auth import bot_login_text, ensure_auth, load_auth, write_private
from referee.config import TournamentConfig

AUTH_SUBDIR = "auth"


def external_agents(config: TournamentConfig) -> list[str]:
    return [n for n, a in config.agents.items() if a.external]


def default_auth_dir(config: TournamentConfig, embedded: bool, run_path: Path, prefix: str) -> str | None:
    """The auth folder an embedded run with an external agent must use (written now), or None."""
    if not embedded or not external_agents(config):
        return None
    out = run_path / AUTH_SUBDIR
    ensure_auth(list(config.agents), out, prefix=prefix)
    return str(out)


def write_bot_login(auth_dir: str | Path, name: str, url: str) -> Path:
    """Bot `name`'s login file in `auth_dir`, rewritten (mode 0600) with the server's `url`."""
    path = Path(auth_dir) / "agents" / f"{name}.env"
    write_private(path, bot_login_text(load_auth(auth_dir), name, url))
    return path


def announce_bots(console: Console, config: TournamentConfig, auth_dir: str, url: str) -> list[Path]:
    """Each external bot's login file, rewritten with `url`; prints the command its author runs."""
    files = []
    for name in external_agents(config):
        path = write_bot_login(auth_dir, name, url)
        files.append(path)
        console.print(
            f"External bot {name}: its login file is {path} (private: the bot's and its bot-check's "
            f"logins). Its author runs, e.g.:\n"
            f"  python examples/bots/python_bot.py --name {name} --login {path}\n"
            f"(any bot: NATS_URL, NATS_USER, NATS_PASSWORD from that file; check it with "
            f"`spielbus bot-check {name} --login {path}`)",
            highlight=False,
            soft_wrap=True,
        )
    return files
