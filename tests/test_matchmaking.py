"""Matchmaking by information (referee/ladder/matchmaking.py): the gain is the real variance fall, the
planner places a newcomer first, respects free slots and balances seats."""

from __future__ import annotations

import itertools
from collections import defaultdict

import numpy as np
import pytest

from referee.ladder.matchmaking import fit, next_pairings, pair_gain, wald_halfwidth


def _field(games: int) -> dict[tuple[str, str], float]:
    wins: dict[tuple[str, str], float] = defaultdict(float)
    for a, b in itertools.combinations(["a", "b", "c"], 2):
        wins[(a, b)] += games * 0.6
        wins[(b, a)] += games * 0.4
    return wins


def test_gain_is_the_fall_of_total_variance() -> None:
    agents = ["a", "b", "c", "new"]
    theta, cov = fit(agents, _field(10))
    i, j = 0, 3
    p = 1.0 / (1.0 + np.exp(theta[j] - theta[i]))
    d = np.zeros(4)
    d[i], d[j] = 1.0, -1.0
    info = np.linalg.pinv(cov) + p * (1 - p) * np.outer(d, d)
    after = np.linalg.pinv(info)
    assert pair_gain(theta, cov, i, j) == pytest.approx(np.trace(cov) - np.trace(after), rel=1e-6)


def test_newcomer_is_scheduled_first_and_narrows() -> None:
    agents = ["a", "b", "c", "new"]
    wins = _field(20)
    picks = next_pairings(agents, wins, {a: 1 for a in agents}, {}, 1)
    assert "new" in (picks[0].first, picks[0].second)
    before = wald_halfwidth(fit(agents, wins)[1])[3]
    wins[(picks[0].first, picks[0].second)] += 1.0
    assert wald_halfwidth(fit(agents, wins)[1])[3] < before


def test_free_slots_and_seat_balance() -> None:
    agents = ["a", "b", "c", "new"]
    picks = next_pairings(agents, _field(5), {"a": 1, "b": 1, "c": 0, "new": 2}, {"new": 5}, 10)
    counts: dict[str, int] = defaultdict(int)
    for p in picks:
        counts[p.first] += 1
        counts[p.second] += 1
        assert p.first != "new"  # it has sat first most: it takes the second seat
    assert counts["c"] == 0 and counts["a"] <= 1 and counts["b"] <= 1 and counts["new"] <= 2
    assert len(picks) == 2


def test_too_few_agents() -> None:
    assert next_pairings(["a"], {}, {"a": 3}, {}, 4) == []


def test_only_entries_of_one_budget_class_are_paired() -> None:
    # "new" is the most informative opponent for everyone, but it plays under another budget
    # class (an LLM with 8 calls a move against bots without a cap): it is paired with nobody.
    agents = ["a", "b", "c", "new"]
    classes = {"a": "unlimited", "b": "unlimited", "c": "unlimited", "new": "8 calls"}
    picks = next_pairings(agents, _field(20), {a: 2 for a in agents}, {}, 10, classes=classes)
    assert picks and all("new" not in (p.first, p.second) for p in picks)
    classes["c"] = "8 calls"
    picks = next_pairings(agents, _field(20), {a: 2 for a in agents}, {}, 10, classes=classes)
    assert {frozenset((p.first, p.second)) for p in picks} == {frozenset("ab"), frozenset(("c", "new"))}
