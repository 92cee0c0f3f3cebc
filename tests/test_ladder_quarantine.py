"""The ladder's fault quarantine (referee/ladder/quarantine.py): benched after a streak, with the
reason, retried after the backoff, which doubles for a repeat offender; a clean match resets."""

from __future__ import annotations

import pytest

from referee.ladder.quarantine import Quarantine


def test_bench_retry_and_backoff() -> None:
    q = Quarantine(limit=2, backoff_s=10, max_backoff_s=15)
    q.result("bot@1", "timeout", 0)
    q.result("bot@1", None, 1)  # a clean match resets the streak
    q.result("bot@1", "timeout", 2)
    assert q.schedulable("bot@1", 2)
    q.result("bot@1", "illegal", 3)
    assert not q.schedulable("bot@1", 4) and "illegal" in q.benched(4)["bot@1"]
    assert q.schedulable("bot@1", 13) and q.benched(13) == {}
    q.result("bot@1", "timeout", 13)
    q.result("bot@1", "timeout", 14)
    assert not q.schedulable("bot@1", 28) and q.schedulable("bot@1", 29)  # doubled, capped at 15
    assert q.schedulable("other@2", 0)


def test_bad_settings() -> None:
    with pytest.raises(ValueError):
        Quarantine(limit=0)


def test_result_returns_the_changed_state_and_restore_puts_it_back() -> None:
    q = Quarantine(limit=1, backoff_s=10)
    assert q.result("bot@1", None, 0) is None  # nothing changed: nothing to store
    state = q.result("bot@1", "timeout", 1)
    assert state is not None and state.until == 11 and "timeout" in state.reason
    fresh = Quarantine(limit=1, backoff_s=10)
    fresh.restore("bot@1", state)
    assert fresh.benched(5) == q.benched(5) and not fresh.schedulable("bot@1", 5)
