"""Matchmaking by information: which pairings to play next so the ladder's ratings firm up fastest.

The ladder's ratings are Bradley-Terry log-strengths (referee/bradley_terry.py), fitted with the same
0.1 pseudo-wins per ordered pair. One more game between i and j adds p q (e_i - e_j)(e_i - e_j)^T
to the Fisher information, p the fitted chance that i beats j and q = 1 - p. With the covariance
S of the current fit (the pseudo-inverse of the information, ratings anchored at mean 0), the
Sherman-Morrison formula gives the expected fall of the total variance from that game:

    gain(i, j) = p q |S d|^2 / (1 + p q d^T S d),    d = e_i - e_j

so a pair gains most when its ratings are uncertain (large S) and close in skill (p q near 1/4).
`next_pairings` ranks the candidate pairs by that gain, takes them greedily while every agent has
a free slot of its concurrency, pairs only agents of one budget class (`classes`: an LLM capped at
8 calls a move never meets an uncapped bot, as chess ladders pair within a time control), and gives
the seat to whoever of the two has sat first less often (seat balance).
`wald_halfwidth` is the matching 95% normal interval half-width in Elo.

Limits: two-player games only (N-player games are rated by Plackett-Luce, which this does not
plan for); the gain is a one-step lookahead at the current fit, not a full Bayesian design; the
Wald width is the planner's measure, the ladder still reports profile-likelihood intervals.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from referee.bradley_terry import ELO_SCALE, PRIOR, grad_hess, with_prior
from referee.bradley_terry import fit as fit_wins

Z95 = 1.959963984540054


@dataclass(frozen=True, slots=True)
class Pairing:
    """One game to schedule: `first` takes seat 0. `gain` is the expected fall of total variance."""

    first: str
    second: str
    gain: float


def fit(
    agents: Sequence[str], wins: Mapping[tuple[str, str], float], prior: float = PRIOR
) -> tuple[np.ndarray, np.ndarray]:
    """Log-strengths (mean 0) and their covariance from the win counts of ordered pairs."""
    idx = {a: i for i, a in enumerate(agents)}
    n = len(agents)
    matrix = np.zeros((n, n))
    for (a, b), w in wins.items():
        if a in idx and b in idx and a != b:
            matrix[idx[a], idx[b]] += w
    pw = with_prior(matrix, prior)
    theta = fit_wins(pw, np.zeros(n))[1] if n > 1 else np.zeros(n)
    _, hess = grad_hess(theta, pw)
    cov = np.linalg.pinv(-hess) if n > 1 else np.zeros((n, n))
    return theta, cov


def wald_halfwidth(cov: np.ndarray) -> np.ndarray:
    """95% normal interval half-width of each rating, in Elo."""
    return np.asarray(Z95 * ELO_SCALE * np.sqrt(np.clip(np.diag(cov), 0.0, None)))


def pair_gain(theta: np.ndarray, cov: np.ndarray, i: int, j: int) -> float:
    p = 1.0 / (1.0 + np.exp(theta[j] - theta[i]))
    w = p * (1.0 - p)
    sd = cov[:, i] - cov[:, j]
    quad = sd[i] - sd[j]
    return float(w * (sd @ sd) / (1.0 + w * quad))


def next_pairings(
    agents: Sequence[str],
    wins: Mapping[tuple[str, str], float],
    free_slots: Mapping[str, int],
    firsts: Mapping[str, int],
    limit: int,
    prior: float = PRIOR,
    classes: Mapping[str, str] | None = None,
    blocked: Callable[[str, str], bool] | None = None,
) -> list[Pairing]:
    """Up to `limit` pairings, best gain first, never more games for an agent than its free slots.

    `firsts` counts how often each agent took seat 0, so seats stay balanced. `classes` maps an
    agent to its budget class: only agents of the same class are paired (all one class if None).
    `blocked(a, b)` true: that pair is not to be played now (the ladder's pace).
    """
    agents = list(agents)
    if len(agents) < 2 or limit <= 0:
        return []
    theta, cov = fit(agents, wins, prior)
    cls = classes or {}
    ranked = sorted(
        (
            (pair_gain(theta, cov, i, j), i, j)
            for i in range(len(agents))
            for j in range(i + 1, len(agents))
            if cls.get(agents[i]) == cls.get(agents[j]) and not (blocked and blocked(agents[i], agents[j]))
        ),
        key=lambda t: -t[0],
    )
    slots = {a: free_slots.get(a, 0) for a in agents}
    seat0 = dict(firsts)
    out: list[Pairing] = []
    for gain, i, j in ranked:
        if len(out) >= limit:
            break
        a, b = agents[i], agents[j]
        if slots[a] <= 0 or slots[b] <= 0:
            continue
        if seat0.get(b, 0) < seat0.get(a, 0):
            a, b = b, a
        seat0[a] = seat0.get(a, 0) + 1
        slots[a] -= 1
        slots[b] -= 1
        out.append(Pairing(a, b, gain))
    return out
