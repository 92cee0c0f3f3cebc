"""Standings and ratings from match records: the one place every view of a run gets them.

- Standings: wins, losses, draws per agent (a win is a sole first place); faults per 100
  moves asked for; fallbacks, LLM calls and tokens per move.
- One order: every rating reads the records in `record_key` order (the schedule's), whatever
  order they arrived or were stored in, so the report, `ratings.json`, `spielbus standings`,
  `replay --rescore`, the live page and the metrics agree (Elo and Plackett-Luce are
  order-dependent).
- Elo as in the LLM Coaching paper appendix B.2: E = 1 / (1 + 10^(-D/400)), R += K (S - E),
  K from the tournament's `[ratings] elo_k` (arena-scale 16 by default; the paper's 0.2 as
  "llm_coaching"). For payoff games (poker) S is the Brownian win probability of eq. 19,
  1 - 1/(1 + exp(2 L mu / max(sigma^2, 100))), from the mean and variance of the pair's payoffs
  over the whole tournament. A forfeit for an invalid action (illegal or malformed) counts as
  `f` of a loss and the rest as a draw, with f from the LLM Coaching paper table 3 per game.
- Bradley-Terry by maximum likelihood with 0.1 pseudo-wins per ordered pair (a draw is half a
  win each way; Hunter's MM iterations finished by Newton's method), on the Elo scale (1500 +
  400 log10 strength, mean log-strength 0), with 95% profile-likelihood intervals, defined for
  perfect scores too (docs/referee.md): the fit on win matrices is referee/bradley_terry.py, this
  module builds the matrices. Checked against `choix` (tests/test_rating_views.py).
- Plackett-Luce (openskill) from each match's whole ranking, beside Bradley-Terry.
- Provider faults are not the model's play: a match a `provider` fault touched (the seat's LLM
  provider failed a decision, under `[policy] provider = "forfeit"` or `"random"`) or left
  unplayed (outcome `void`) counts in no result and no rating, unless `[ratings]
  count_provider_faults = true`. Standings show per agent apart: `provider_faults` (voided plays
  included), `voided` (plays its provider voided), `excluded` (matches left out for it),
  `truncated` and `filtered` (LLM calls so classified) and `bad_output` (illegal and malformed
  answers: the model's own).

Limits: Elo and Bradley-Terry enter an N-player match as every pair of seats ordered by
finishing place (Plackett-Luce does not split it). The profile intervals cost a few hundred
small Newton solves per agent: fine for tens of agents, not thousands.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from bus.protocol import LLMCall, MatchRecord
from referee.bradley_terry import ELO_SCALE, fit_with_intervals, mm
from referee.config import RatingsConfig
from referee.outcome import provider_touched

# the LLM Coaching paper, table 3: how much of a loss an invalid action counts.
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
    fallbacks: int = Field(
        default=0, description="Moves the agent marked as fallbacks (`stats.fallback`): its LLM failed."
    )
    fallback_rate: float = Field(default=0.0, description="fallbacks / moves (0 without moves).")
    llm_calls: int = Field(default=0, description="LLM requests answered, over all its moves.")
    tokens: int = Field(default=0, description="Prompt and completion tokens, over all its moves.")
    calls_per_move: float = 0.0
    tokens_per_move: float = 0.0
    provider_faults: int = Field(
        default=0, description="Decisions its LLM provider failed (voided plays included): not its play."
    )
    voided: int = Field(default=0, description="Plays of a match voided by its provider's failure.")
    excluded: int = Field(
        default=0, description="Matches it sat in that a provider fault touched: in no result or rating."
    )
    truncated: int = Field(default=0, description="LLM calls cut at the token limit.")
    filtered: int = Field(default=0, description="LLM calls stopped by a content filter.")
    bad_output: int = Field(default=0, description="Illegal or malformed answers: the model's own.")
    cost_usd: float | None = Field(
        default=None,
        description="Dollars its LLM calls cost by its price table, over all its moves; None: no price.",
    )

    @property
    def fallback_share(self) -> float:
        return self.fallbacks / self.moves if self.moves else 0.0

    def over_fallbacks(self, threshold: float) -> bool:
        """More than `threshold` of its moves were fallbacks (the tournament's `fallback_threshold`)."""
        return self.moves > 0 and self.fallback_share > threshold

    @property
    def mostly_fallbacks(self) -> bool:
        """Most of its moves were fallbacks: an LLM agent whose server was down is no LLM agent."""
        return self.moves > 0 and self.fallback_share > 0.5


class Rating(BaseModel):
    agent: str
    elo: float
    bt: float
    bt_low: float = Field(description="95% profile-likelihood interval of `bt` (docs/referee.md)")
    bt_high: float
    pl_mu: float | None = Field(default=None, description="Plackett-Luce (openskill) mean")
    pl_sigma: float | None = Field(default=None, description="Plackett-Luce (openskill) uncertainty")


@dataclass(slots=True)
class Pair:
    """One pairwise comparison derived from a match: score of a against b."""

    a: str
    b: str
    score: float
    game: str
    payoff: float | None = None
    match: int = 0


@dataclass
class _Sums:
    """Running sums behind one `Standing` (means and rates are derived when asked)."""

    played: int = 0
    wins: int = 0
    losses: int = 0
    draws: int = 0
    points: float = 0.0
    moves: int = 0
    fallbacks: int = 0
    llm_calls: int = 0
    tokens: int = 0
    faults: dict[str, int] = field(default_factory=dict)
    unplayed_faults: int = 0
    place_sum: float = 0.0
    return_sum: float = 0.0
    voided: int = 0
    excluded: int = 0
    call_outcomes: dict[str, int] = field(default_factory=dict)
    cost_usd: float | None = None


class StandingsTable:
    """Standings folded one record at a time: `add` costs O(size of that record), never a rescan.

    `standings(records)` is this table filled with `records`; the live page keeps one per
    tournament and adds each `ended` record as it arrives.
    """

    def __init__(self, count_provider_faults: bool = False) -> None:
        self._sums: dict[str, _Sums] = {}
        self.records = 0
        self.count_provider_faults = count_provider_faults

    def _row(self, agent: str) -> _Sums:
        row = self._sums.get(agent)
        if row is None:
            row = self._sums[agent] = _Sums()
        return row

    def _count_calls(self, agent: str, calls: list[LLMCall] | None) -> None:
        if calls:
            outcomes = self._row(agent).call_outcomes
            for c in calls:
                outcomes[c.outcome] = outcomes.get(c.outcome, 0) + 1

    def add(self, rec: MatchRecord) -> None:
        self.records += 1
        for void in rec.voided or ():
            self._row(void.agent).voided += 1
        if provider_touched(rec) and not self.count_provider_faults:
            for agent in dict.fromkeys(rec.seats):
                self._row(agent).excluded += 1
        else:
            self._add_result(rec)
        # Moves and faults are the agent's own play and compliance, touched or not.
        self._add_moves(rec)
        for mv in rec.moves:
            if mv.player >= 0 and mv.agent:
                self._count_calls(mv.agent, mv.calls)
        for f in rec.faults:
            self._count_calls(f.agent, f.calls)

    def _add_result(self, rec: MatchRecord) -> None:
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

    def _add_moves(self, rec: MatchRecord) -> None:
        for mv in rec.moves:
            if mv.player >= 0 and mv.agent:
                row = self._row(mv.agent)
                row.moves += 1
                if mv.usage is not None:
                    row.llm_calls += mv.usage.llm_calls
                    row.tokens += mv.usage.prompt_tokens + mv.usage.completion_tokens
                    if mv.usage.cost_usd is not None:
                        row.cost_usd = (row.cost_usd or 0.0) + mv.usage.cost_usd
                if mv.stats is not None and (mv.stats.model_extra or {}).get("fallback"):
                    row.fallbacks += 1
        # Faults that produced no move (forfeits and retried answers) still count as moves asked for.
        forced = {(m.turn, m.player) for m in rec.moves if m.forced}
        for f in rec.faults:
            st = self._row(f.agent)
            st.faults[f.reason] = st.faults.get(f.reason, 0) + 1
            if (f.turn, f.seat) not in forced and f.reason != "provider":
                st.unplayed_faults += 1

    def rows(self) -> list[Standing]:
        out = []
        for agent, s in self._sums.items():
            # The provider's faults are not the agent's rule compliance.
            total_faults = sum(n for r, n in s.faults.items() if r != "provider")
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
                    fallbacks=s.fallbacks,
                    fallback_rate=round(s.fallbacks / s.moves, 4) if s.moves else 0.0,
                    llm_calls=s.llm_calls,
                    tokens=s.tokens,
                    calls_per_move=round(s.llm_calls / s.moves, 3) if s.moves else 0.0,
                    tokens_per_move=round(s.tokens / s.moves, 1) if s.moves else 0.0,
                    faults=dict(s.faults),
                    faults_per_100_moves=round(100.0 * total_faults / denominator, 2),
                    mean_place=round(s.place_sum / s.played, 3) if s.played else 0.0,
                    mean_return=round(s.return_sum / s.played, 4) if s.played else 0.0,
                    provider_faults=s.faults.get("provider", 0) + s.voided,
                    voided=s.voided,
                    excluded=s.excluded,
                    truncated=s.call_outcomes.get("truncated", 0),
                    filtered=s.call_outcomes.get("filtered", 0),
                    bad_output=sum(s.faults.get(r, 0) for r in INVALID_REASONS),
                    cost_usd=None if s.cost_usd is None else round(s.cost_usd, 6),
                )
            )
        return sorted(out, key=lambda s: (-s.points, s.losses, s.agent))


def standings(records: list[MatchRecord], count_provider_faults: bool = False) -> list[Standing]:
    table = StandingsTable(count_provider_faults)
    for rec in records:
        table.add(rec)
    return table.rows()


def record_pairs(rec: MatchRecord, cfg: RatingsConfig, match: int = 0) -> list[Pair]:
    """The pairwise comparisons one record contributes (none for `error`/`pending`/`void` matches, nor
    for one a provider fault touched unless `cfg.count_provider_faults`)."""
    if rec.outcome in ("error", "pending", "void") or not rec.ranks:
        return []
    if provider_touched(rec) and not cfg.count_provider_faults:
        return []
    adjust = cfg.invalid_adjustment.get(rec.game.name, INVALID_ADJUSTMENT.get(rec.game.name, 1.0))
    invalid_forfeit = (
        rec.outcome == "forfeit" and rec.faults and rec.faults[-1].reason in INVALID_REASONS and rec.forfeited
    )
    pairs: list[Pair] = []
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
            pairs.append(Pair(a, b, score, rec.game.name, payoff, match))
    return pairs


def run_pairs(records: list[MatchRecord], cfg: RatingsConfig) -> list[Pair]:
    return [p for mi, rec in enumerate(records) for p in record_pairs(rec, cfg, mi)]


def brownian_win_probability(mu: float, var: float, stack: float) -> float:
    x = 2 * stack * mu / max(var, 100.0)
    x = max(min(x, 700.0), -700.0)
    return 1.0 - 1.0 / (1.0 + math.exp(x))


def elo_from_pairs(pairs: list[Pair], cfg: RatingsConfig, agents: list[str]) -> dict[str, float]:
    # Payoff games: replace each pair's score by the Brownian win probability of that pairing.
    payoffs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for p in pairs:
        if p.game in PAYOFF_GAMES and p.payoff is not None:
            payoffs[(p.game, p.a, p.b)].append(p.payoff)
    brownian: dict[tuple[str, str, str], float] = {}
    for key, xs in payoffs.items():
        mu = sum(xs) / len(xs)
        var = sum((x - mu) ** 2 for x in xs) / max(len(xs) - 1, 1)
        brownian[key] = brownian_win_probability(mu, var, cfg.stack)
    r = dict.fromkeys(agents, cfg.elo_initial)
    for p in pairs:
        s = brownian.get((p.game, p.a, p.b), p.score) if p.payoff is not None else p.score
        e = 1.0 / (1.0 + 10 ** (-(r[p.a] - r[p.b]) / 400.0))
        delta = cfg.elo_k * (s - e)
        r[p.a] += delta
        r[p.b] -= delta
    return r


def elo(records: list[MatchRecord], cfg: RatingsConfig, agents: list[str]) -> dict[str, float]:
    return elo_from_pairs(run_pairs(sorted(records, key=record_key), cfg), cfg, agents)


def _win_matrix(pairs: list[Pair], idx: dict[str, int]) -> np.ndarray:
    n = len(idx)
    wins = np.zeros((n, n))
    if pairs:
        i = np.fromiter((idx[p.a] for p in pairs), dtype=np.intp, count=len(pairs))
        j = np.fromiter((idx[p.b] for p in pairs), dtype=np.intp, count=len(pairs))
        score = np.fromiter((p.score for p in pairs), dtype=float, count=len(pairs))
        np.add.at(wins, (i, j), score)
        np.add.at(wins, (j, i), 1.0 - score)
    return wins


def bradley_terry(
    pairs: list[Pair], agents: list[str], prior: float = 0.1, iters: int = 200
) -> dict[str, float]:
    idx = {a: i for i, a in enumerate(agents)}
    s = mm(_win_matrix(pairs, idx)[None], prior, iters)[0]
    return {a: 1500.0 + 400.0 * float(np.log10(s[idx[a]])) for a in agents}


RecordKey = tuple[str, tuple[tuple[int, str], ...], int]


def record_key(rec: MatchRecord) -> RecordKey:
    """The one order every view rates records in: the schedule's (match ids are
    `<tournament>-<index>`; numbers compare as numbers, so `m10` follows `m9`), whatever order the
    records arrived or were stored in. Elo and Plackett-Luce are order-dependent: without one
    order the run report, `spielbus standings` and the live page disagreed."""
    parts = tuple((int(p), "") if p.isdigit() else (-1, p) for p in re.split(r"(\d+)", rec.match_id) if p)
    return (rec.tournament, parts, rec.attempt)


PL_MODEL = "Plackett-Luce (openskill)"


class PairTally:
    """What the ratings need, folded one match at a time:

    - the win matrix (a draw is half a win each way): Bradley-Terry and its profile-likelihood
      intervals cost the number of agents, not of matches;
    - Elo and the Plackett-Luce ratings (openskill), updated match by match in `record_key` order.
      A match that arrives before one that sorts earlier (the live page sees completion order)
      marks them stale, and they are replayed in order from the kept comparisons and places when
      next asked, so every view shows the same numbers. Payoff games' Brownian win probability
      depends on the whole tournament's payoffs of a pairing, so once one is seen Elo is replayed
      every time.
    """

    def __init__(self, cfg: RatingsConfig) -> None:
        self.cfg = cfg
        self.agents: set[str] = set()
        self.wins: dict[tuple[str, str], float] = defaultdict(float)
        self.elo: dict[str, float] = {}
        self.pl = PlackettLuceTally()
        # (key, comparisons, seats, ranks) of every match, for a replay in order.
        self.kept: list[tuple[RecordKey, list[Pair], list[str], list[int]]] = []
        self.has_payoffs = False
        self.in_order = True
        self.matches = 0

    @property
    def pairs(self) -> list[Pair]:
        return [p for _, ps, _, _ in sorted(self.kept, key=lambda m: m[0]) for p in ps]

    def add_record(self, rec: MatchRecord) -> None:
        self.add_match(record_pairs(rec, self.cfg, self.matches), rec.seats, rec.ranks, record_key(rec))

    def add_match(
        self,
        pairs: list[Pair],
        seats: list[str] | None = None,
        ranks: list[int] | None = None,
        key: RecordKey | None = None,
    ) -> None:
        key = key if key is not None else ("", ((self.matches, ""),), 1)
        if self.kept and key < self.kept[-1][0]:
            self.in_order = False
        self.matches += 1
        self.agents.update(seats or ())
        for p in pairs:
            self.agents.update((p.a, p.b))
            self.wins[(p.a, p.b)] += p.score
            self.wins[(p.b, p.a)] += 1.0 - p.score
            if p.game in PAYOFF_GAMES and p.payoff is not None:
                self.has_payoffs = True
        rated = list(seats or []) if pairs and ranks else []
        self.kept.append((key, pairs, rated, list(ranks or []) if rated else []))
        if self.in_order:
            self._elo_step(self.elo, pairs)
            self.pl.add(rated, ranks or [])

    def _elo_step(self, r: dict[str, float], pairs: list[Pair]) -> None:
        for p in pairs:
            ra = r.setdefault(p.a, self.cfg.elo_initial)
            rb = r.setdefault(p.b, self.cfg.elo_initial)
            delta = self.cfg.elo_k * (p.score - 1.0 / (1.0 + 10 ** (-(ra - rb) / 400.0)))
            r[p.a], r[p.b] = ra + delta, rb - delta

    def _replay(self) -> tuple[dict[str, float], PlackettLuceTally]:
        """Elo and Plackett-Luce from the kept matches in `record_key` order."""
        elo: dict[str, float] = {}
        pl = PlackettLuceTally()
        for _, pairs, seats, ranks in sorted(self.kept, key=lambda m: m[0]):
            self._elo_step(elo, pairs)
            pl.add(seats, ranks)
        return elo, pl

    def ratings(self, agents: list[str] | None = None) -> list[Rating]:
        """Safe to call from another thread while `add_match` runs on the loop: it reads copies."""
        wins, elo, pl = dict(self.wins), dict(self.elo), self.pl
        if not self.in_order:
            elo, pl = self._replay()
        names = agents if agents is not None else sorted(self.agents)
        if not names:
            return []
        idx = {a: i for i, a in enumerate(names)}
        n = len(names)
        matrix = np.zeros((n, n))
        for (a, b), w in wins.items():
            matrix[idx[a], idx[b]] = w
        anchored = anchor_ratings(self.cfg, names)
        theta, bounds = fit_with_intervals(
            matrix, anchors={idx[a]: (r - 1500.0) / ELO_SCALE for a, r in anchored.items()}
        )
        if self.has_payoffs:
            e = elo_from_pairs(self.pairs, self.cfg, names)
        else:
            e = {a: elo.get(a, self.cfg.elo_initial) for a in names}
        if anchored:  # Elo has no fit to hold: shifted so the anchors sit at their ratings on average
            shift = float(np.mean([r - e[a] for a, r in anchored.items()]))
            e = {a: v + shift for a, v in e.items()}
        out = []
        for k, a in enumerate(names):
            mu, sigma = pl.rating(a)
            out.append(
                Rating(
                    agent=a,
                    elo=round(e[a], 2),
                    bt=round(1500.0 + ELO_SCALE * float(theta[k]), 1),
                    bt_low=round(1500.0 + ELO_SCALE * float(bounds[k, 0]), 1),
                    bt_high=round(1500.0 + ELO_SCALE * float(bounds[k, 1]), 1),
                    pl_mu=round(mu, 2),
                    pl_sigma=round(sigma, 2),
                )
            )
        return sorted(out, key=lambda r: -r.bt)


class PlackettLuceTally:
    """Plackett-Luce ratings (openskill's `PlackettLuce`, its default mu = 25, sigma = 25/3), one
    match at a time: every seat of a match ranked by its finishing place at once, not split into
    pairs, so N-player games are rated as what they are. An agent holding several seats of one
    match is rated by its best seat."""

    def __init__(self) -> None:
        from openskill.models import PlackettLuce

        self.model = PlackettLuce()
        self.players: dict[str, Any] = {}

    def add(self, seats: list[str], ranks: list[int]) -> None:
        best: dict[str, int] = {}
        for agent, rank in zip(seats, ranks, strict=False):
            best[agent] = min(rank, best.get(agent, rank))
        if len(best) < 2:
            return
        agents = list(best)
        teams = [[self.players.get(a) or self.model.rating(name=a)] for a in agents]
        rated = self.model.rate(teams, ranks=[float(best[a]) for a in agents])
        for a, team in zip(agents, rated, strict=True):
            self.players[a] = team[0]

    def rating(self, agent: str) -> tuple[float, float]:
        p = self.players.get(agent) or self.model.rating(name=agent)
        return float(p.mu), float(p.sigma)


def anchor_ratings(cfg: RatingsConfig, names: list[str]) -> dict[str, float]:
    """The `[ratings] anchors` among `names` (a provenance row `name@hash` takes its agent's anchor)."""
    out = {}
    for name in names:
        agent = name.split("@", 1)[0]
        if name in cfg.anchors or agent in cfg.anchors:
            out[name] = cfg.anchors.get(name, cfg.anchors.get(agent, 0.0))
    return out


def ratings(records: list[MatchRecord], cfg: RatingsConfig) -> list[Rating]:
    """The ratings of a run, the same for every view: records rated in `record_key` order."""
    agents = sorted({a for rec in records for a in rec.seats})
    tally = PairTally(cfg)
    for rec in sorted(records, key=record_key):
        tally.add_record(rec)
    return tally.ratings(agents)
