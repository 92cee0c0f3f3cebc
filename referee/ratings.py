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
import random
from collections import defaultdict
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from bus.protocol import MatchRecord
from referee.config import RatingsConfig

# Seed 004, table 3: how much of a loss an invalid action counts.
INVALID_ADJUSTMENT: dict[str, float] = {
    "leduc_poker": 1.0,
    "liars_dice": 1.0,
    "universal_poker": 0.7,
    "simplified_holdem": 0.7,
    "goofspiel": 0.7,
    "chess": 0.3,
}
PAYOFF_GAMES = ("leduc_poker", "kuhn_poker", "universal_poker", "simplified_holdem")
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


def standings(records: list[MatchRecord]) -> list[Standing]:
    table: dict[str, Standing] = {}
    for rec in records:
        for seat, agent in enumerate(rec.seats):
            st = table.setdefault(agent, Standing(agent=agent, faults={}))
            st.played += 1
            ranks = rec.ranks or [1] * len(rec.seats)
            # Running sums; divided by `played` below.
            st.mean_place += ranks[seat]
            st.mean_return += rec.returns[seat] if len(rec.returns) == len(rec.seats) else 0.0
            first = [s for s, r in enumerate(ranks) if r == 1]
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
                table.setdefault(mv.agent, Standing(agent=mv.agent, faults={})).moves += 1
        for f in rec.faults:
            st = table.setdefault(f.agent, Standing(agent=f.agent, faults={}))
            st.faults[f.reason] = st.faults.get(f.reason, 0) + 1
    for st in table.values():
        if st.played:
            st.mean_place = round(st.mean_place / st.played, 3)
            st.mean_return = round(st.mean_return / st.played, 4)
        total_faults = sum(st.faults.values())
        # Moves asked for: those played (forced ones included) plus answers refused without a move.
        denominator = max(st.moves + _unplayed_faults(records, st.agent), 1)
        st.faults_per_100_moves = round(100.0 * total_faults / denominator, 2)
    return sorted(table.values(), key=lambda s: (-s.points, s.losses, s.agent))


def _unplayed_faults(records: list[MatchRecord], agent: str) -> int:
    """Faults that produced no move (forfeits and retried answers) still count as moves asked for."""
    n = 0
    for rec in records:
        forced = {(m.turn, m.player) for m in rec.moves if m.forced}
        n += sum(1 for f in rec.faults if f.agent == agent and (f.turn, f.seat) not in forced)
    return n


def _pairs(records: list[MatchRecord], cfg: RatingsConfig) -> list[_Pair]:
    pairs: list[_Pair] = []
    for mi, rec in enumerate(records):
        if rec.outcome in ("error", "pending") or not rec.ranks:
            continue
        adjust = cfg.invalid_adjustment.get(rec.game.name, INVALID_ADJUSTMENT.get(rec.game.name, 1.0))
        invalid_forfeit = (
            rec.outcome == "forfeit"
            and rec.faults
            and rec.faults[-1].reason in INVALID_REASONS
            and rec.forfeited
        )
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
                pairs.append(_Pair(a, b, score, rec.game.name, payoff, mi))
    return pairs


def _brownian(mu: float, var: float, stack: float) -> float:
    x = 2 * stack * mu / max(var, 100.0)
    x = max(min(x, 700.0), -700.0)
    return 1.0 - 1.0 / (1.0 + math.exp(x))


def elo(records: list[MatchRecord], cfg: RatingsConfig, agents: list[str]) -> dict[str, float]:
    pairs = _pairs(records, cfg)
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


def bradley_terry(
    pairs: list[_Pair], agents: list[str], prior: float = 0.1, iters: int = 200
) -> dict[str, float]:
    idx = {a: i for i, a in enumerate(agents)}
    n = len(agents)
    wins = [[0.0] * n for _ in range(n)]
    for p in pairs:
        i, j = idx[p.a], idx[p.b]
        wins[i][j] += p.score
        wins[j][i] += 1.0 - p.score
    for i in range(n):
        for j in range(n):
            if i != j:
                wins[i][j] += prior
    games = [[wins[i][j] + wins[j][i] for j in range(n)] for i in range(n)]
    w = [sum(wins[i]) for i in range(n)]
    s = [1.0] * n
    for _ in range(iters):
        new = []
        for i in range(n):
            denom = sum(games[i][j] / (s[i] + s[j]) for j in range(n) if j != i and games[i][j] > 0)
            new.append(w[i] / denom if denom > 0 else s[i])
        mean = math.exp(sum(math.log(x) for x in new) / n)
        new = [x / mean for x in new]
        if max(abs(a - b) for a, b in zip(new, s, strict=True)) < 1e-9:
            s = new
            break
        s = new
    return {a: 1500.0 + 400.0 * math.log10(s[idx[a]]) for a in agents}


def ratings(records: list[MatchRecord], cfg: RatingsConfig, seed: int = 0) -> list[Rating]:
    agents = sorted({a for rec in records for a in rec.seats})
    if not agents:
        return []
    pairs = _pairs(records, cfg)
    point = bradley_terry(pairs, agents)
    by_match: dict[int, list[_Pair]] = defaultdict(list)
    for p in pairs:
        by_match[p.match].append(p)
    matches = list(by_match.values())
    rng = random.Random(seed)
    samples: dict[str, list[float]] = {a: [] for a in agents}
    if matches:
        for _ in range(cfg.bootstrap):
            resampled = [p for _ in matches for p in rng.choice(matches)]
            bt = bradley_terry(resampled, agents, iters=100)
            for a in agents:
                samples[a].append(bt[a])
    e = elo(records, cfg, agents)
    out = []
    for a in agents:
        xs = sorted(samples[a]) or [point[a]]
        lo = xs[int(0.025 * (len(xs) - 1))]
        hi = xs[math.ceil(0.975 * (len(xs) - 1))]
        out.append(
            Rating(
                agent=a, elo=round(e[a], 2), bt=round(point[a], 1), bt_low=round(lo, 1), bt_high=round(hi, 1)
            )
        )
    return sorted(out, key=lambda r: -r.bt)
