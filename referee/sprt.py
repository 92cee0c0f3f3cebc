"""The sequential probability ratio test over game pairs (pentanomial model), pure statistics.

Two agents play games in colour-swapped pairs (same start, same seed, seats swapped). A pair
scores 0, 1/4, 1/2, 3/4 or 1 for the tested agent (the first one named), so the results are
counted in five bins: LL, LD, WL+DD, WD, WW. The test is the generalized SPRT of the chess
engine testers fastchess (github.com/Disservin/fastchess, `app/src/matchmaking/sprt/`) and
OpenBench (github.com/AndyGrant/OpenBench), after Michel Van den Bergh's notes "Comments on
normalized Elo" and "Comparing the approximations for the generalized log likelihood ratio of
a multinomial distribution" (Fishtest):

- H0: the Elo difference is `elo0`, H1: it is `elo1` (elo0 < elo1).
- LLR = N * sum_i p^_i log(p1_i / p0_i): p^ the observed pair distribution, p0/p1 the
  distributions closest to it (maximum likelihood) under the constraint of each hypothesis.
- `normalized` (the default, as in fastchess): the constraint is on normalized Elo,
  (mu - 1/2) / sigma = sqrt(2) * nelo / (800 / ln 10) over pairs; `logistic`: on the mean score,
  mu = 1 / (1 + 10^(-elo/400)).
- Bounds (Wald): lower = log(beta / (1 - alpha)), upper = log((1 - beta) / alpha); the test
  accepts H0 at or below the lower bound and H1 at or above the upper one.
- An empty bin counts as 1e-3 pairs (as fastchess regularizes), so the LLR is finite from the
  first pair on.
- Elo estimate: the mean pair score mapped through the logistic curve, with the 95% interval of
  the mean (normal approximation, per-pair variance); normalized Elo likewise.

Limits: two agents, one game, two-player zero-sum results (a win is the better place). A pair
with a record that has no result (`error`/`pending`/`void`, or a `provider` fault in it) or only
one finished game is not scored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bus.protocol import MatchRecord
from referee.outcome import provider_touched

PAIR_SCORES = (0.0, 0.25, 0.5, 0.75, 1.0)
NELO_SCALE = 800.0 / math.log(10.0)  # normalized Elo per unit of t = (mu - 1/2) / sigma
REGULARIZE = 1e-3
Z95 = 1.959963984540054


class SprtConfig(BaseModel):
    """The `[sprt]` table of a tournament file with `format = "sprt"`."""

    model_config = ConfigDict(extra="forbid")
    elo0: float = Field(
        default=0.0, ge=-2000, le=2000, allow_inf_nan=False, description="H0: the Elo difference is elo0"
    )
    elo1: float = Field(
        default=10.0, ge=-2000, le=2000, allow_inf_nan=False, description="H1: the Elo difference is elo1"
    )
    alpha: float = Field(default=0.05, allow_inf_nan=False, description="false positive rate, in (0, 1)")
    beta: float = Field(default=0.05, allow_inf_nan=False, description="false negative rate, in (0, 1)")
    model: Literal["normalized", "logistic"] = "normalized"
    max_pairs: int = Field(
        default=500, ge=1, le=1_000_000, description="stop undecided after this many game pairs"
    )
    in_flight: int = Field(
        default=0, ge=0, le=1024, description="pairs submitted at once (0: the concurrency)"
    )

    @model_validator(mode="after")
    def _ranges(self) -> SprtConfig:
        # Checked here (not with gt/lt) so that the message names the key plainly.
        for key in ("alpha", "beta"):
            v = getattr(self, key)
            if not 0.0 < v < 1.0:
                raise ValueError(f"sprt.{key} must be in (0, 1), got {v}")
        if self.alpha + self.beta >= 1.0:
            raise ValueError(f"sprt.alpha + sprt.beta must be below 1, got {self.alpha + self.beta}")
        if self.elo0 >= self.elo1:
            raise ValueError(f"sprt.elo0 ({self.elo0}) must be less than sprt.elo1 ({self.elo1})")
        return self


def bounds(alpha: float, beta: float) -> tuple[float, float]:
    """Wald's (lower, upper) LLR bounds."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


@dataclass(frozen=True)
class Pentanomial:
    """Pair counts by the tested agent's pair score: LL (0), LD (1/4), WL or DD (1/2), WD (3/4), WW (1)."""

    ll: int = 0
    ld: int = 0
    wl_dd: int = 0
    wd: int = 0
    ww: int = 0

    @property
    def counts(self) -> tuple[int, int, int, int, int]:
        return (self.ll, self.ld, self.wl_dd, self.wd, self.ww)

    @property
    def pairs(self) -> int:
        return sum(self.counts)

    def add(self, pair_score: float) -> Pentanomial:
        c = list(self.counts)
        c[PAIR_SCORES.index(pair_score)] += 1
        return Pentanomial(*c)


def _root(f: Callable[[float], float], lo: float, hi: float, tol: float = 1e-12) -> float:
    """A root of an increasing-or-decreasing `f` on the open interval (lo, hi), by bisection:
    the ends are poles of f, so they are pulled in until the signs differ."""
    a, b = lo, hi
    span = hi - lo
    for shrink in (1e-9, 1e-7, 1e-5, 1e-3):
        a, b = lo + shrink * span, hi - shrink * span
        if f(a) * f(b) < 0:
            break
    fa = f(a)
    for _ in range(200):
        m = 0.5 * (a + b)
        fm = f(m)
        if fm == 0.0 or b - a < tol:
            return m
        if (fm < 0) == (fa < 0):
            a, fa = m, fm
        else:
            b = m
    return 0.5 * (a + b)


class _Infeasible(ArithmeticError):
    """The linearized constraint has no distribution with the observed support."""


def _tilt(phat: Sequence[float], phi: Sequence[float]) -> list[float]:
    """The distribution p_i = phat_i / (1 + theta phi_i) with sum_i p_i phi_i = 0: the maximum
    likelihood distribution under the linear constraint E_p[phi] = 0 (a Lagrange multiplier theta;
    Van den Bergh, "Comparing the approximations...", eqs. 1.2-1.3)."""
    if min(phi) >= 0.0 or max(phi) <= 0.0:
        raise _Infeasible()
    lo, hi = -1.0 / max(phi), -1.0 / min(phi)

    def g(theta: float) -> float:
        return sum(q * f / (1.0 + theta * f) for q, f in zip(phat, phi, strict=True))

    theta = _root(g, lo, hi)
    return [q / (1.0 + theta * f) for q, f in zip(phat, phi, strict=True)]


def _mle_logistic(phat: Sequence[float], s: float) -> list[float]:
    return _tilt(phat, [a - s for a in PAIR_SCORES])


def _normalized_from(phat: Sequence[float], t: float, p: list[float]) -> list[float]:
    """The fixed-point iteration of Van den Bergh's "Comments on normalized Elo" section 4.1 from
    `p`: linearize (mu - 1/2) / sigma = t at the current estimate, tilt, repeat."""
    for _ in range(100):
        mu = sum(a * q for a, q in zip(PAIR_SCORES, p, strict=True))
        sigma = math.sqrt(sum(q * (a - mu) ** 2 for a, q in zip(PAIR_SCORES, p, strict=True)))
        phi = [a - 0.5 - 0.5 * t * sigma * (1.0 + ((a - mu) / sigma) ** 2) for a in PAIR_SCORES]
        new = _tilt(phat, phi)
        diff = max(abs(x - y) for x, y in zip(new, p, strict=True))
        p = new
        if diff < 1e-12:
            break
    return p


def _mle_normalized(phat: Sequence[float], t: float) -> list[float]:
    """Maximum likelihood distribution with (mu - 1/2) / sigma = t. From the uniform distribution,
    as Van den Bergh suggests; for a large |t| whose first linearization is infeasible, by
    continuation: t in 20 steps from 0 (always feasible), each from the previous solution."""
    uniform = [1.0 / len(PAIR_SCORES)] * len(PAIR_SCORES)
    try:
        return _normalized_from(phat, t, uniform)
    except _Infeasible:
        p = uniform
        for k in range(1, 21):
            p = _normalized_from(phat, t * k / 20, p)
        return p


def elo_to_score(elo: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (-elo / 400.0))


def score_to_elo(score: float) -> float:
    score = min(max(score, 1e-12), 1.0 - 1e-12)
    return -400.0 * math.log10(1.0 / score - 1.0)


def llr(penta: Pentanomial, elo0: float, elo1: float, model: str = "normalized") -> float:
    """The log-likelihood ratio of H1 against H0 for these pair counts (see the module docstring)."""
    regular = [c if c > 0 else REGULARIZE for c in penta.counts]
    total = sum(regular)
    phat = [c / total for c in regular]
    if model == "normalized":
        p0 = _mle_normalized(phat, math.sqrt(2.0) * elo0 / NELO_SCALE)
        p1 = _mle_normalized(phat, math.sqrt(2.0) * elo1 / NELO_SCALE)
    elif model == "logistic":
        p0 = _mle_logistic(phat, elo_to_score(elo0))
        p1 = _mle_logistic(phat, elo_to_score(elo1))
    else:
        raise ValueError(f"unknown SPRT model {model!r}")
    return total * sum(q * (math.log(b) - math.log(a)) for q, a, b in zip(phat, p0, p1, strict=True))


class EloEstimate(BaseModel):
    elo: float
    elo_low: float
    elo_high: float
    nelo: float | None = Field(description="normalized Elo (None while every pair scored the same)")
    nelo_low: float | None
    nelo_high: float | None
    score: float


def elo_estimate(penta: Pentanomial) -> EloEstimate | None:
    """Elo (logistic) and normalized Elo with 95% intervals, from the mean and variance per pair
    (as fastchess's `EloPentanomial`); None before the first pair."""
    n = penta.pairs
    if n == 0:
        return None
    mu = sum(a * c for a, c in zip(PAIR_SCORES, penta.counts, strict=True)) / n
    var = sum(c * (a - mu) ** 2 for a, c in zip(PAIR_SCORES, penta.counts, strict=True)) / n
    half = Z95 * math.sqrt(var / n)

    def nelo(s: float) -> float | None:
        return (s - 0.5) / math.sqrt(2.0 * var) * NELO_SCALE if var > 0 else None

    return EloEstimate(
        elo=score_to_elo(mu),
        elo_low=score_to_elo(mu - half),
        elo_high=score_to_elo(mu + half),
        nelo=nelo(mu),
        nelo_low=nelo(mu - half),
        nelo_high=nelo(mu + half),
        score=mu,
    )


class SprtStatus(BaseModel):
    """What the standings show for an SPRT run, as it goes; written to summary.json."""

    tested: str
    baseline: str
    elo0: float
    elo1: float
    alpha: float
    beta: float
    model: str
    pairs: int
    pentanomial: list[int] = Field(description="pair counts LL, LD, WL+DD, WD, WW for the tested agent")
    llr: float
    lower: float
    upper: float
    decision: Literal["H0", "H1", "continue"]
    estimate: EloEstimate | None

    def line(self) -> str:
        return (
            f"SPRT {self.tested} vs {self.baseline} {self.model} [{self.elo0:g}, {self.elo1:g}]: "
            f"LLR {self.llr:.2f} ({self.lower:.2f}, {self.upper:.2f}) after {self.pairs} pairs "
            f"{self.pentanomial}; {self.elo_text()}; {self.decision_text()}"
        )

    def short(self) -> str:
        """For a progress bar: the LLR, its bounds, the Elo estimate."""
        return f"LLR {self.llr:.2f} ({self.lower:.2f}, {self.upper:.2f}) {self.elo_text()}"

    def elo_text(self) -> str:
        e = self.estimate
        if e is None:
            return "Elo -"
        text = f"Elo {e.elo:+.1f} [{e.elo_low:+.1f}, {e.elo_high:+.1f}]"
        return text + (f", nElo {e.nelo:+.1f}" if e.nelo is not None else "")

    def decision_text(self) -> str:
        return {"H0": "H0 accepted", "H1": "H1 accepted", "continue": "undecided"}[self.decision]


def game_score(record: MatchRecord, agent: str) -> float | None:
    """`agent`'s score in a two-player record (1 win, 1/2 draw, 0 loss); None without a result."""
    if record.outcome in ("error", "pending", "void") or len(record.ranks) != 2 or agent not in record.seats:
        return None
    if provider_touched(record):  # a provider's failure is not the agent's play (referee/ratings.py)
        return None
    me = record.seats.index(agent)
    mine, theirs = record.ranks[me], record.ranks[1 - me]
    return 1.0 if mine < theirs else 0.0 if mine > theirs else 0.5


def status(cfg: SprtConfig, tested: str, baseline: str, pair_scores: Sequence[float]) -> SprtStatus:
    penta = Pentanomial()
    for s in pair_scores:
        penta = penta.add(s)
    lower, upper = bounds(cfg.alpha, cfg.beta)
    value = llr(penta, cfg.elo0, cfg.elo1, cfg.model) if penta.pairs else 0.0
    decision: Literal["H0", "H1", "continue"] = (
        "H1" if value >= upper else "H0" if value <= lower else "continue"
    )
    return SprtStatus(
        tested=tested,
        baseline=baseline,
        elo0=cfg.elo0,
        elo1=cfg.elo1,
        alpha=cfg.alpha,
        beta=cfg.beta,
        model=cfg.model,
        pairs=penta.pairs,
        pentanomial=list(penta.counts),
        llr=value,
        lower=lower,
        upper=upper,
        decision=decision,
        estimate=elo_estimate(penta),
    )


def pair_score(pair: Sequence[MatchRecord], tested: str) -> float | None:
    """The tested agent's mean score over a complete pair, None if a game has no result."""
    scores = [game_score(r, tested) for r in pair]
    if len(scores) != 2 or any(s is None for s in scores):
        return None
    return sum(s for s in scores if s is not None) / 2.0


def status_of_records(
    cfg: SprtConfig, tested: str, baseline: str, records: Sequence[MatchRecord]
) -> SprtStatus:
    """The test over a run folder's records (an interrupted run, `spielbus standings`): the two
    matches of a pair are schedule numbers 2k and 2k + 1 (the match id's last part)."""
    pairs: dict[str, list[MatchRecord]] = {}
    for r in records:
        prefix, _, number = r.match_id.rpartition("-")
        if number.isdigit():
            pairs.setdefault(f"{prefix}-{int(number) // 2}", []).append(r)
    scores = [s for p in pairs.values() if (s := pair_score(p, tested)) is not None]
    return status(cfg, tested, baseline, scores)
