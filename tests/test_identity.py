"""bus/identity.py: the account behind a ladder entry is the one the auth folder gives the name."""

from __future__ import annotations

import pytest

from bus.auth import agent_account
from bus.identity import account_of, entry_name


def test_options_do_not_change_the_account() -> None:
    assert account_of("alice@0123456789") == account_of("alice@fedcba9876") == account_of("alice")
    assert account_of("alice@0123456789") != account_of("bob@0123456789")


def test_the_account_is_the_one_auth_writes() -> None:
    assert account_of("alice@0123456789") == agent_account("alice") == "agent-alice"
    assert entry_name("alice@x") == "alice"


def test_a_bad_name_is_refused() -> None:
    with pytest.raises(ValueError):
        account_of("a.b@x")
