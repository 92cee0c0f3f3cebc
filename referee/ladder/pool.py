"""The ladder's pool: which of the agents a ladder file allows are on the bus now, under which entry.

`probe` asks each allowed name's nats.micro discovery subject `$SRV.INFO.<name>` (what every agent
runtime, and any bot that registers a nats.micro service, answers). Under accounts (bus/auth.py)
the referee account imports `$SRV.*.<name>` from account `agent-<name>` only, so only the holder
of that login can answer for that name: nobody joins the pool under another's name. On an open
bus (no accounts) anyone could answer; the ladder should run with accounts.

An entry is `name@<provenance>`, a hash of the strategy version, models and options hash the agent
announces, so a changed prompt or model is rated as a new entry. Each member also carries its
`account`: the login its messages come from, the ladder's key for benches, pace and audit
(`account_of`, by default bus/identity.py's: `agent-<name>`, the one account that can answer for
that name under accounts). Changing options changes the entry, never the account. `Pool.update`
reports who joined and who left since the last probe; the ladder schedules only present entries.

The ladder service (referee/ladder/service.py) probes every `probe_s` seconds.

Limits: one request per allowed name per probe: fine for tens of names.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Callable

import nats.errors
from nats.aio.client import Client as NATS
from pydantic import BaseModel, ConfigDict, ValidationError

from bus import identity


class _Info(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str
    metadata: dict[str, str] = {}


class PoolMember(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    entry: str
    kind: str
    games: tuple[str, ...]
    account: str = ""


def entry_id(name: str, metadata: dict[str, str]) -> str:
    prov = "|".join(metadata.get(k, "") for k in ("kind", "strategy_version", "models", "options_hash"))
    return f"{name}@{hashlib.sha256(prov.encode()).hexdigest()[:10]}"


async def probe_one(nc: NATS, name: str, wait_s: float) -> PoolMember | None:
    try:
        msg = await nc.request(f"$SRV.INFO.{name}", b"", timeout=wait_s)
        info = _Info.model_validate(json.loads(msg.data))
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError, ValidationError, ValueError):
        return None
    if info.name != name:  # a service answering for a name it does not hold
        return None
    games = tuple(g for g in info.metadata.get("games", "*").split(",") if g)
    return PoolMember(
        name=name, entry=entry_id(name, info.metadata), kind=info.metadata.get("kind", ""), games=games
    )


async def probe(nc: NATS, names: list[str], wait_s: float = 2.0) -> dict[str, PoolMember]:
    found = await asyncio.gather(*(probe_one(nc, n, wait_s) for n in names))
    return {m.name: m for m in found if m is not None}


class Pool:
    def __init__(self, allowed: list[str], account_of: Callable[[str], str] = identity.account_of) -> None:
        self.allowed = list(allowed)
        self.account_of = account_of
        self.members: dict[str, PoolMember] = {}

    async def update(self, nc: NATS, wait_s: float = 2.0) -> tuple[list[PoolMember], list[PoolMember]]:
        """Probe again; (joined, left). A changed entry (new provenance) leaves and joins."""
        now = {
            n: m.model_copy(update={"account": self.account_of(n)})
            for n, m in (await probe(nc, self.allowed, wait_s)).items()
        }
        old = {m.entry: m for m in self.members.values()}
        new = {m.entry: m for m in now.values()}
        self.members = now
        return [m for e, m in new.items() if e not in old], [m for e, m in old.items() if e not in new]
