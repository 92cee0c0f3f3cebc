"""Standings and ratings from match records.

- Standings: wins, losses, draws per agent (a win is a sole first place).
- Elo as in seed 004 appendix B.2: E = 1 / (1 + 10^(-D/400)), R += K (S - E),
  K = 0.2 by default, records in the order played. For payoff games (poker) S
  is the Brownian win probability of eq. 19, 1 - 1/(1 + exp(2 L mu / max(sigma^2, 100))),
  from the mean and variance of the pair's payoffs over the whole tournament.
  A forfeit for an invalid action (illegal or malformed) counts as `f` of a loss
  and the rest as a draw, with f from seed 004 table 3 per game (1.0 elsewhere).
- Bradley-Terry by maximum likelihood (Hunter's MM iterations, a draw is half a
  win each way, a small symmetric prior keeps unbeaten agents finite), on the Elo
  scale (1500 + 400 log10 strength, mean strength 1), with 95% intervals from a
  bootstrap over matches.
- Rule compliance: faults per 100 moves the agent was asked for, apart from skill.

N-player matches enter Elo and Bradley-Terry as every pair of seats, ordered by
finishing place.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np
from pydantic import BaseModel, Field

from bus.protocol import MatchRecord
from referee.config import RatingsConfig

# Seed 004, table 3: how much of a loss an invalid action counts.
INVALID_ADJUSTMENT: dict[str, float] = {
    "leduc_poker": 1.0,
    "liars_dice": 1.0,
    "universal_poker": 0.7,
    "goofspiel": 0.7,
    "chess": 0.3,
}
PAYOFF_GAMES = ("leduc_poker", "kuhn_poker", "universal_poker")
INVALID_REASONS = ("illegal", "malformed")


class Standing(BaseModel):
    agent: str
    played: int = 0
    wins: int = 0
    losses: int = 0
    draws: int = 0
    points: float = 0.0
    moves: int = 0
    faults: dict[str, int] = {}
    faults_per_100_moves: float = 0.0
    mean_place: float = Field(default=0.0, description="Mean finishing place (1 is best); N-player games.")
    mean_return: float = Field(default=0.0, description="Mean return per match (chips in poker).")


class Rating(BaseModel):
    agent: str
    elo: float
    bt: float
    bt_low: float
    bt_high: float


@dataclass
class _Pair:
    """One pairwise comparison derived from a match: score of a against b."""

    a: str
    b: str
    score: float
    game: str
    payoff: float | None = None
    match: int = 0


@dataclass
class Summary:
    standings: list[Standing] = field(default_factory=list)
    ratings: list[Rating] = field(default_factory=list)


@dataclass
class _Sums:
    """Running sums behind one `Standing` (means and rates are derived when asked)."""

    played: int = 0
    wins: int = 0
    losses: int = 0
    draws: int = 0
    points: float = 0.0
    moves: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    unplayed_faults: int = 0
    place_sum: float = 0.0
    return_sum: float = 0.0


class StandingsTable:
    """Standings folded one record at a time: `add` costs O(size of that record), never a rescan.

    `standings(records)` is this table filled with `records`; the live page keeps one per
    tournament and adds each `ended` record as it arrives.
    """

    def __init__(self) -> None:
        self._sums: dict[str, _Sums] = {}
        self.records = 0

    def _row(self, agent: str) -> _Sums:
        row = self._sums.get(agent)
        if row is None:
            row = self._sums[agent] = _Sums()
        return row

    def add(self, rec: MatchRecord) -> None:
        self.records += 1
        ranks = rec.ranks or [1] * len(rec.seats)
        first = [s for s, r in enumerate(ranks) if r == 1]
        for seat, agent in enumerate(rec.seats):
            st = self._row(agent)
            st.played += 1
            st.place_sum += ranks[seat]
            st.return_sum += rec.returns[seat] if len(rec.returns) == len(rec.seats) else 0.0
            if ranks[seat] == 1 and len(first) == 1:
                st.wins += 1
                st.points += 1
            elif ranks[seat] == 1:
                st.draws += 1
                st.points += 0.5
            else:
                st.losses += 1
        for mv in rec.moves:
            if mv.player >= 0 and mv.agent:
                self._row(mv.agent).moves += 1
        # Faults that produced no move (forfeits and retried answers) still count as moves asked for.
        forced = {(m.turn, m.player) for m in rec.moves if m.forced}
        for f in rec.faults:
            st = self._row(f.agent)
            st.faults[f.reason] = st.faults.get(f.reason, 0) + 1
            if (f.turn, f.seat) not in forced:
                st.unplayed_faults += 1

    def rows(self) -> list[Standing]:
        out = []
        for agent, s in self._sums.items():
            total_faults = sum(s.faults.values())
            denominator = max(s.moves + s.unplayed_faults, 1)
            out.append(
                Standing(
                    agent=agent,
                    played=s.played,
                    wins=s.wins,
                    losses=s.losses,
                    draws=s.draws,
                    points=s.points,
                    moves=s.moves,
                    faults=dict(s.faults),
                    faults_per_100_moves=round(100.0 * total_faults / denominator, 2),
                    mean_place=round(s.place_sum / s.played, 3) if s.played else 0.0,
                    mean_return=round(s.return_sum / s.played, 4) if s.played else 0.0,
                )
            )
        return sorted(out, key=lambda s: (-s.points, s.losses, s.agent))


def standings(records: list[MatchRecord]) -> list[Standing]:
    table = StandingsTable()
    for rec in records:
        table.add(rec)
    return table.rows()


def record_pairs(rec: MatchRecord, cfg: RatingsConfig, match: int = 0) -> list[_Pair]:
    """The pairwise comparisons one record contributes (none for `error`/`pending` matches)."""
    if rec.outcome in ("error", "pending") or not rec.ranks:
        return []
    adjust = cfg.invalid_adjustment.get(rec.game.name, INVALID_ADJUSTMENT.get(rec.game.name, 1.0))
    invalid_forfeit = (
        rec.outcome == "forfeit" and rec.faults and rec.faults[-1].reason in INVALID_REASONS and rec.forfeited
    )
    pairs: list[_Pair] = []
    n = len(rec.seats)
    for i in range(n):
        for j in range(i + 1, n):
            a, b = rec.seats[i], rec.seats[j]
            if a == b:
                continue
            ri, rj = rec.ranks[i], rec.ranks[j]
            score = 1.0 if ri < rj else 0.0 if ri > rj else 0.5
            if invalid_forfeit and (i in rec.forfeited or j in rec.forfeited):
                loser_score = 0.5 * (1.0 - adjust)
                score = loser_score if i in rec.forfeited else 1.0 - loser_score
            payoff = rec.returns[i] if rec.returns and rec.outcome != "forfeit" else None
            pairs.append(_Pair(a, b, score, rec.game.name, payoff, match))
    return pairs


def _pairs(records: list[MatchRecord], cfg: RatingsConfig) -> list[_Pair]:
    return [p for mi, rec in enumerate(records) for p in record_pairs(rec, cfg, mi)]


def _brownian(mu: float, var: float, stack: float) -> float:
    x = 2 * stack * mu / max(var, 100.0)
    x = max(min(x, 700.0), -700.0)
    return 1.0 - 1.0 / (1.0 + math.exp(x))


def elo_from_pairs(pairs: list[_Pair], cfg: RatingsConfig, agents: list[str]) -> dict[str, float]:
    # Payoff games: replace each pair's score by the Brownian win probability of that pairing.
    payoffs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for p in pairs:
        if p.game in PAYOFF_GAMES and p.payoff is not None:
            payoffs[(p.game, p.a, p.b)].append(p.payoff)
    brownian: dict[tuple[str, str, str], float] = {}
    for key, xs in payoffs.items():
        mu = sum(xs) / len(xs)
        var = sum((x - mu) ** 2 for x in xs) / max(len(xs) - 1, 1)
        brownian[key] = _brownian(mu, var, cfg.stack)
    r = dict.fromkeys(agents, cfg.elo_initial)
    for p in pairs:
        s = brownian.get((p.game, p.a, p.b), p.score) if p.payoff is not None else p.score
        e = 1.0 / (1.0 + 10 ** (-(r[p.a] - r[p.b]) / 400.0))
        delta = cfg.elo_k * (s - e)
        r[p.a] += delta
        r[p.b] -= delta
    return r


def elo(records: list[MatchRecord], cfg: RatingsConfig, agents: list[str]) -> dict[str, float]:
    return elo_from_pairs(_pairs(records, cfg), cfg, agents)


def _win_matrix(pairs: list[_Pair], idx: dict[str, int]) -> np.ndarray:
    n = len(idx)
    wins = np.zeros((n, n))
    if pairs:
        i = np.fromiter((idx[p.a] for p in pairs), dtype=np.intp, count=len(pairs))
        j = np.fromiter((idx[p.b] for p in pairs), dtype=np.intp, count=len(pairs))
        score = np.fromiter((p.score for p in pairs), dtype=float, count=len(pairs))
        np.add.at(wins, (i, j), score)
        np.add.at(wins, (j, i), 1.0 - score)
    return wins


def _mm(wins: np.ndarray, prior: float, iters: int) -> np.ndarray:
    """Hunter's MM iterations for a batch of win matrices (B, n, n); strengths (B, n), mean log 0.

    A draw counts as half a win each way; `prior` pseudo-wins in every off-diagonal cell keep an
    unbeaten agent finite. The batch stops when every sample has converged (1e-9).
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


def _elo_scale(s: np.ndarray) -> np.ndarray:
    return 1500.0 + 400.0 * np.log10(s)


def bradley_terry(
    pairs: list[_Pair], agents: list[str], prior: float = 0.1, iters: int = 200
) -> dict[str, float]:
    idx = {a: i for i, a in enumerate(agents)}
    s = _mm(_win_matrix(pairs, idx)[None], prior, iters)[0]
    return {a: float(_elo_scale(s[idx[a]])) for a in agents}


def _bootstrap(
    pairs: list[_Pair], agents: list[str], samples: int, seed: int, prior: float = 0.1
) -> np.ndarray | None:
    """Bradley-Terry on `samples` resamplings of the matches (with replacement): (samples, n).

    Matches that contribute the same comparisons are one type; a resampling draws the count of
    each type from the multinomial over types, the same distribution as drawing matches one by one.
    """
    idx = {a: i for i, a in enumerate(agents)}
    by_match: dict[int, list[tuple[int, int, float]]] = defaultdict(list)
    for p in pairs:
        by_match[p.match].append((idx[p.a], idx[p.b], p.score))
    if not by_match or samples <= 0:
        return None
    types: dict[tuple[tuple[int, int, float], ...], int] = defaultdict(int)
    for comps in by_match.values():
        types[tuple(sorted(comps))] += 1
    n = len(agents)
    contrib = np.zeros((len(types), n * n))
    for t, comps in enumerate(types):
        for i, j, score in comps:
            contrib[t, i * n + j] += score
            contrib[t, j * n + i] += 1.0 - score
    mult = np.fromiter(types.values(), dtype=float, count=len(types))
    total = int(mult.sum())
    counts = np.random.default_rng(seed).multinomial(total, mult / total, size=samples)
    wins = (counts @ contrib).reshape(samples, n, n)
    return _elo_scale(_mm(wins, prior, 100))


def ratings_from_pairs(
    pairs: list[_Pair], agents: list[str], cfg: RatingsConfig, seed: int = 0
) -> list[Rating]:
    if not agents:
        return []
    point = bradley_terry(pairs, agents)
    boot = _bootstrap(pairs, agents, cfg.bootstrap, seed)
    e = elo_from_pairs(pairs, cfg, agents)
    out = []
    for k, a in enumerate(agents):
        xs = np.sort(boot[:, k]) if boot is not None else np.array([point[a]])
        lo = float(xs[int(0.025 * (len(xs) - 1))])
        hi = float(xs[math.ceil(0.975 * (len(xs) - 1))])
        out.append(
            Rating(
                agent=a, elo=round(e[a], 2), bt=round(point[a], 1), bt_low=round(lo, 1), bt_high=round(hi, 1)
            )
        )
    return sorted(out, key=lambda r: -r.bt)


def ratings(records: list[MatchRecord], cfg: RatingsConfig, seed: int = 0) -> list[Rating]:
    agents = sorted({a for rec in records for a in rec.seats})
    return ratings_from_pairs(_pairs(records, cfg), agents, cfg, seed)
