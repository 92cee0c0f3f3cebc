"""Bradley-Terry by maximum likelihood, as functions on plain win matrices (numpy arrays).

`wins[i, j]` is how often agent i beat agent j (a draw is half a win each way); nothing here
knows agents' names, games or records, so the tournament's ratings (referee/ratings.py), the
ladder's leaderboard and its matchmaking (referee/ladder/) fit the same model the same way.

- `with_prior` adds the pseudo-wins (0.1 per ordered pair by default) that keep an unbeaten
  agent's rating finite.
- `mm`: Hunter's MM iterations, batched over a stack of matrices; `fit`: Newton's method on the
  log-strengths (mean 0), optionally with one agent's log-strength held (the profile).
- `profile_intervals`: 95% profile-likelihood intervals, defined for perfect scores too.
- `fit_with_intervals`: MM to get close, Newton to finish (MM's last digits converge slowly),
  and the intervals: what a leaderboard shows.

Log-strengths are natural-log units; `ELO_SCALE` turns them into Elo points (1500 + ELO_SCALE
theta). Limits: the profile intervals cost a few hundred small Newton solves per agent: fine for
tens of agents, not thousands.
"""

from __future__ import annotations

import math

import numpy as np

ELO_SCALE = 400.0 / math.log(10.0)  # Elo points per natural-log unit of strength
CHI2_95 = 3.841458820694124  # the 95% quantile of chi-squared with one degree of freedom
PRIOR = 0.1  # pseudo-wins per ordered pair


def with_prior(matrix: np.ndarray, prior: float = PRIOR) -> np.ndarray:
    """The win matrix with `prior` pseudo-wins in every off-diagonal cell (and a zero diagonal)."""
    off = 1.0 - np.eye(len(matrix))
    return matrix * off + prior * off


def mm(wins: np.ndarray, prior: float = PRIOR, iters: int = 200) -> np.ndarray:
    """Hunter's MM iterations for a batch of win matrices (B, n, n); strengths (B, n), mean log 0.

    `prior` pseudo-wins in every off-diagonal cell keep an unbeaten agent finite. The batch stops
    when every sample has converged (1e-9).
    """
    b, n, _ = wins.shape
    off = 1.0 - np.eye(n)
    wins = wins * off + prior * off
    games = wins + wins.transpose(0, 2, 1)
    w = wins.sum(axis=2)
    s = np.ones((b, n))
    for _ in range(iters):
        denom = (games / (s[:, :, None] + s[:, None, :])).sum(axis=2)
        new = np.where(denom > 0, w / np.where(denom > 0, denom, 1.0), s)
        new = new / np.exp(np.log(new).mean(axis=1, keepdims=True))
        done = np.abs(new - s).max() < 1e-9
        s = new
        if done:
            break
    return s


def loglik(theta: np.ndarray, wins: np.ndarray) -> float:
    """Bradley-Terry log-likelihood of log-strengths `theta` given the (pseudo-)win matrix."""
    d = theta[:, None] - theta[None, :]
    return float((wins * -np.logaddexp(0.0, -d)).sum())


def grad_hess(theta: np.ndarray, wins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gradient and Hessian of `loglik` at `theta` (minus the Hessian is the Fisher information)."""
    games = wins + wins.T
    p = 0.5 * (1.0 + np.tanh(0.5 * (theta[:, None] - theta[None, :])))  # the logistic, no overflow
    grad = wins.sum(axis=1) - (games * p).sum(axis=1)
    w = games * p * p.T
    hess = w - np.diag(w.sum(axis=1))
    return grad, hess


def fit(
    wins: np.ndarray, start: np.ndarray, k: int | None = None, c: float = 0.0
) -> tuple[float, np.ndarray]:
    """The largest log-likelihood over log-strengths with mean 0 (and `theta[k] = c` when `k` is
    given: the profile), and where it is. Newton's method on the free coordinates under the
    constraint (the KKT system), with a backtracking line search; the log-likelihood is concave."""
    n = len(start)
    free = np.ones(n, dtype=bool)
    theta = start - start.mean()
    if k is not None:
        free[k] = False
        theta[k] = c
        theta[free] += (-c - theta[free].sum()) / (n - 1)  # back on the constraint sum = 0
    m = int(free.sum())
    value = loglik(theta, wins)
    for _ in range(100):
        grad, hess = grad_hess(theta, wins)
        kkt = np.zeros((m + 1, m + 1))
        kkt[:m, :m], kkt[:m, m], kkt[m, :m] = -hess[np.ix_(free, free)], 1.0, 1.0
        # Least squares: far out on a profile the probabilities saturate and the system can be singular.
        step = np.linalg.lstsq(kkt, np.concatenate([grad[free], [0.0]]), rcond=None)[0][:m]
        t = 1.0
        while True:
            trial = theta.copy()
            trial[free] += t * step
            new = loglik(trial, wins)
            if new >= value - 1e-12 or t < 1e-6:
                break
            t /= 2
        theta, value = trial, max(new, value)
        if np.abs(t * step).max() < 1e-10:  # 2e-8 Elo
            break
    return value, theta


def _excess(wins: np.ndarray, best: float, k: int, c: float, warm: np.ndarray) -> tuple[float, np.ndarray]:
    """How far rating `c` of agent `k` is outside the 95% profile-likelihood interval (the
    deviance less chi2(1, 0.95): negative inside), and the fit that gave it."""
    value, arg = fit(wins, warm, k, c)
    return 2.0 * (best - value) - CHI2_95, arg


def profile_intervals(wins: np.ndarray, theta: np.ndarray) -> np.ndarray:
    """95% profile-likelihood intervals of each anchored log-strength: (n, 2).

    The set of values c of agent k's rating whose best fit, all other ratings free (mean 0),
    is within chi2(1, 0.95) / 2 of the best fit overall. `wins` includes the prior's pseudo-wins,
    so the likelihood is bounded and the interval defined, for a perfect score too; its width
    comes from the number of games, never from resampling (a 4-0 bootstrap resamples 4-0 every time).
    """
    n = len(theta)
    out = np.repeat(theta[:, None], 2, axis=1)
    if n < 2:
        return out
    best = loglik(theta, wins)
    for k in range(n):
        for side, sign in ((0, -1.0), (1, 1.0)):
            inside, f_in, step, warm = float(theta[k]), -CHI2_95, 0.5, theta
            outside = inside + sign * step
            f_out, arg = _excess(wins, best, k, outside, warm)
            while f_out <= 0 and step < 64.0:  # 64 nats: about 11,000 Elo, far past any real gap
                inside, f_in, warm, step = outside, f_out, arg, step * 2
                outside = inside + sign * step
                f_out, arg = _excess(wins, best, k, outside, warm)
            # Regula falsi, Illinois variant: the deviance is smooth, a few steps reach 0.01 Elo.
            for _ in range(60):
                if abs(outside - inside) < 5e-5 or f_out <= 0:
                    break
                mid = outside - f_out * (outside - inside) / (f_out - f_in)
                f_mid, arg = _excess(wins, best, k, mid, warm)
                if f_mid > 0:
                    outside, f_out = mid, f_mid
                    f_in /= 2
                else:
                    inside, f_in, warm = mid, f_mid, arg
                    f_out /= 2
                if abs(f_mid) < 1e-7:
                    inside = outside = mid
            out[k, side] = (inside + outside) / 2
    return out


def fit_with_intervals(matrix: np.ndarray, prior: float = PRIOR) -> tuple[np.ndarray, np.ndarray]:
    """Log-strengths (n,) and their 95% profile-likelihood intervals (n, 2) from a raw win matrix."""
    pseudo = with_prior(matrix, prior)
    _, theta = fit(pseudo, np.log(mm(matrix[None], prior)[0]))
    return theta, profile_intervals(pseudo, theta)
