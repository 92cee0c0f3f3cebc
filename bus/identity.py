"""Which account a bot's messages come from: the identity the ladder benches, paces and audits.

Under accounts (bus/auth.py, static; bus/registry.py, registered at run time) agent name `N` is
served by exactly one NATS account: the only account exporting `P.turn.N`, `P.notify.N` and
`$SRV.*.N`, whose services the referee account imports. So every answer the referee gets on a
turn of `N`, and every `$SRV.INFO.N` answer the ladder's pool hears, was sent by a user of that
account, whatever options or provenance hash (`name@hash` entries) the bot announces. The account
is named `agent-N` in both modes (a registered account's JWT carries that name; its public key is
kept by the registry, bus/registry.py), and a name once taken by an account is never given to
another one (revoking keeps the name taken).

`account_of(entry)` is that account for a ladder entry (`name@hash`) or a bare agent name: the key
quarantine, pacing and audit use so that a bot changing its options keeps its history.

Limits: on an open bus (no accounts) anyone can answer for any name, so the name identifies no one;
one author may still register several names (several accounts): admission policy (invite codes,
operator approval) is what bounds that, not this function.
"""

from __future__ import annotations

from bus.subjects import check_agent_name


def entry_name(entry: str) -> str:
    """The agent name of a ladder entry `name@hash` (a bare name is returned as is)."""
    return entry.split("@", 1)[0]


def account_of(entry: str) -> str:
    """The account (the login) behind ladder entry `name@hash` or agent name `name`: `agent-<name>`."""
    return f"agent-{check_agent_name(entry_name(entry))}"
