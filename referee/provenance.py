"""Standings and ratings split by provenance: one row per (agent name, provenance hash).

A record carries, per agent, the provenance the referee read from the agent's service info
(kind, version, models, a hash of its options: prompt and configuration included, and a hash of
its whole service metadata).
When an agent's prompt or options change between runs, its name stays the same but its
provenance does not; `split_by_provenance` relabels every seat, move and fault of such a record
as `name@<hash>` (8 hex digits of the SHA-256 of the provenance without the name), so the
ordinary standings and ratings keep the two versions apart instead of silently mixing them.

The same agent against an LLM server at another address (the embedded server's port changes every
run) is the same row. Limits: an agent whose record has no provenance (a hand-written bot that is
no micro service) keeps its plain name; the hash is of what the agent reports, so two agents
reporting identical metadata under one name are one row; a prompt held in code (not an option)
changes the row only with the strategy's version.
"""

from __future__ import annotations

import hashlib
import json

from bus.protocol import MatchRecord, Provenance

HASH_LEN = 8


def provenance_hash(prov: Provenance) -> str:
    """A short, stable hash of what the agent is: everything in `prov` but its name; for agents that
    report an `options_hash`, its kind, version, models without their `@url` and that hash (the
    `config_hash` of the whole metadata changes with the LLM server's address)."""
    data = prov.model_dump(mode="json", exclude={"agent"})
    if data.get("options_hash"):
        data = {
            "kind": prov.kind,
            "version": prov.version,
            "models": [m.split("@", 1)[0] for m in prov.models],
            "options_hash": data["options_hash"],
        }
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:HASH_LEN]


def provenance_label(agent: str, prov: Provenance | None) -> str:
    return f"{agent}@{provenance_hash(prov)}" if prov is not None else agent


def relabel(record: MatchRecord) -> MatchRecord:
    """`record` with each agent named by (name, provenance hash)."""
    names = {p.agent: provenance_label(p.agent, p) for p in record.provenance}
    if not names:
        return record

    def name(agent: str) -> str:
        return names.get(agent, agent)

    return record.model_copy(
        update={
            "seats": [name(a) for a in record.seats],
            "moves": [m.model_copy(update={"agent": name(m.agent)}) if m.agent else m for m in record.moves],
            "faults": [f.model_copy(update={"agent": name(f.agent)}) for f in record.faults],
            "provenance": [p.model_copy(update={"agent": name(p.agent)}) for p in record.provenance],
        }
    )


def split_by_provenance(records: list[MatchRecord]) -> list[MatchRecord]:
    return [relabel(r) for r in records]
