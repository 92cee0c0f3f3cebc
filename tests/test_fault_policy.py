"""The fault policy (referee/faults.py) and the lateness rule (referee/request.py), without NATS:
both are pure functions of their arguments. The behaviour over the bus is in test_referee_faults.py
and test_referee_reliability.py."""

from __future__ import annotations

from typing import cast

import pytest

from bus.protocol import FAULT_REASONS, FaultPolicy, FaultReason
from referee.faults import decide, retry_note
from referee.request import STALL_READ_S, STALL_S, read_late

# The policy's `kind` rules every fault but `provider` (the LLM provider's, ruled by `provider`).
KIND_FAULTS = [cast(FaultReason, r) for r in FAULT_REASONS if r != "provider"]
AGENT_FAULTS = [r for r in KIND_FAULTS if r != "no_responder"]


@pytest.mark.parametrize("reason", KIND_FAULTS)
@pytest.mark.parametrize("attempt", [1, 2, 5])
def test_forfeit_policy_always_forfeits(reason: FaultReason, attempt: int) -> None:
    assert decide(reason, attempt, FaultPolicy(kind="forfeit")) == "forfeit"


@pytest.mark.parametrize("reason", KIND_FAULTS)
def test_random_policy_always_plays_at_random(reason: FaultReason) -> None:
    assert decide(reason, 1, FaultPolicy(kind="random")) == "random"
    assert decide(reason, 99, FaultPolicy(kind="random", retries=0)) == "random"


@pytest.mark.parametrize("reason", AGENT_FAULTS)
def test_retry_policy_asks_again_retries_times_then_forfeits(reason: FaultReason) -> None:
    policy = FaultPolicy(kind="retry", retries=2)
    # Attempts 1 and 2 fail and are asked again; the third ask is the last.
    assert [decide(reason, a, policy) for a in (1, 2, 3, 4)] == ["retry", "retry", "forfeit", "forfeit"]


def test_retry_policy_with_no_retries_forfeits_at_once() -> None:
    assert decide("illegal", 1, FaultPolicy(kind="retry", retries=0)) == "forfeit"


def test_no_responder_is_never_retried_by_the_policy() -> None:
    # The request already asked again with backoff until the deadline: nobody listens.
    assert decide("no_responder", 1, FaultPolicy(kind="retry", retries=5)) == "forfeit"


@pytest.mark.parametrize("kind", ["forfeit", "retry", "random"])
@pytest.mark.parametrize("provider", ["void", "forfeit", "random"])
def test_provider_faults_follow_the_provider_rule_whatever_the_kind(kind: str, provider: str) -> None:
    policy = FaultPolicy.model_validate({"kind": kind, "provider": provider, "retries": 3})
    assert [decide("provider", a, policy) for a in (1, 2)] == [provider, provider]


def test_attempts_count_from_one() -> None:
    with pytest.raises(ValueError, match="from 1"):
        decide("timeout", 0, FaultPolicy())


def test_retry_note_names_the_reason_and_detail() -> None:
    assert retry_note("illegal", "id 9 is not a legal action") == "illegal: id 9 is not a legal action"


def test_a_reply_read_before_the_deadline_is_in_time() -> None:
    assert not read_late(read_at=9.9, end=10.0, timer_lag=None)
    assert not read_late(read_at=10.0, end=10.0, timer_lag=0.0)


def test_a_reply_read_after_an_on_time_timer_is_late() -> None:
    # The deadline timer ran on time: the loop was not stalled, the reply came late.
    assert read_late(read_at=10.001, end=10.0, timer_lag=0.0)
    assert read_late(read_at=10.5, end=10.0, timer_lag=STALL_S / 2)


def test_a_reply_read_in_the_referees_own_stall_is_forgiven() -> None:
    stall = 0.3  # the loop was busy 300 ms past the deadline
    assert not read_late(read_at=10.0 + stall, end=10.0, timer_lag=stall)
    assert not read_late(read_at=10.0 + stall + STALL_READ_S / 2, end=10.0, timer_lag=stall)
    # Read well after the stall ended: the reply arrived after the deadline.
    assert read_late(read_at=10.0 + stall + STALL_READ_S + 0.01, end=10.0, timer_lag=stall)


def test_a_reply_read_before_the_timer_ran_counts_the_overrun_as_the_stall() -> None:
    assert not read_late(read_at=10.1, end=10.0, timer_lag=None)
    assert read_late(read_at=10.0 + STALL_S / 2, end=10.0, timer_lag=None)
