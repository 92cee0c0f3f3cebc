"""Collusion made visible: pairings whose mutual results the rest of the ladder does not explain,
and accounts that forfeit to one opponent only (`spielbus ladder audit`, the page's audit panel).

Pairings (per game, of accounts). For each pair of accounts A, B with at least `min_games` mutual
two-player games, Bradley-Terry is fitted on every other game of that game (the same fit and 0.1
pseudo-wins as matchmaking, referee/ladder/matchmaking.py), i.e. on their results against everyone
else, which gives p, the chance that A beats B (leaving out the games of pairings flagged already:
see `suspect_pairs`). A's mutual score k of n (a draw half a win, rounded
to whole games) is tested against Binomial(n, p) with the exact two-sided binomial test (the
p-value sums the probabilities of every count no more likely than k). Since p is an estimate, the
p-value reported is the larger of that test's and of a normal test whose variance adds the
uncertainty of p (the delta method: n^2 (p q)^2 Var(theta_A - theta_B) from the fit's covariance),
so a long honest series between two accounts with little evidence against the field is not
flagged for a p that was never known precisely. A pairing is flagged when
its p-value is below `alpha` divided by the number of pairings tested (Bonferroni), so a large
ladder does not flag honest pairs by chance. Sybils that throw games to each other score far from
what their results against the field predict: their pair's p-value is tiny.

Forfeits. An account is listed when it faulted in at least `min_forfeits` matches, all against a
single opponent account, while it also played others.

Limits: two-player results only (seats of N-player games are not audited); an account that plays
nobody but its partner has no rating against the field (p stays near 1/2 from the prior), so a
pair of sybils isolated from everyone is flagged only as far as their score is one-sided; ratings
split by entries are pooled per account here. The test assumes independent games at fixed
strengths: a bot that learns between games can depart from it honestly.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable

from pydantic import BaseModel

from referee.ladder.matchmaking import fit
from referee.ladder.store import LadderResult, win_counts


class SuspectPair(BaseModel):
    game: str
    first: str
    second: str
    games: int
    score: float  # first's mutual score (wins, draws half)
    expected: float  # what their results against everyone else predict
    p_value: float
    flagged: bool


class OneSidedForfeits(BaseModel):
    account: str
    opponent: str
    forfeits: int
    other_matches: int


class Audit(BaseModel):
    alpha: float
    pairs_tested: int
    pairs: list[SuspectPair]  # flagged first, then by p-value
    forfeits: list[OneSidedForfeits]


def binomial_two_sided(k: int, n: int, p: float) -> float:
    """The exact two-sided binomial test's p-value of k successes in n at chance p."""
    if n == 0:
        return 1.0
    p = min(max(p, 1e-12), 1 - 1e-12)

    def logpmf(i: int) -> float:
        return (
            math.lgamma(n + 1)
            - math.lgamma(i + 1)
            - math.lgamma(n - i + 1)
            + i * math.log(p)
            + (n - i) * math.log1p(-p)
        )

    ref = logpmf(k)
    total = sum(math.exp(lp) for i in range(n + 1) if (lp := logpmf(i)) <= ref + 1e-7)
    return min(1.0, total)


def uncertain_p_test(score: float, n: int, p: float, var_d: float) -> float:
    """Two-sided normal test of a score of n games at a predicted chance p that is itself
    uncertain: the variance n p q of the games plus n^2 (p q)^2 var_d, the delta method's variance
    of n p from the variance var_d of the rating difference."""
    pq = p * (1.0 - p)
    var = n * pq + (n * pq) ** 2 * var_d
    if var <= 0:
        return 1.0
    return math.erfc(abs(score - n * p) / math.sqrt(2 * var))


def _two_player(results: list[LadderResult], account: Callable[[str], str]) -> list[LadderResult]:
    """Two-player results with entries replaced by accounts (a match of one account against itself
    is left out)."""
    out = []
    for r in results:
        if r.seats and len(r.seats) != 2:
            continue
        a, b = account(r.first), account(r.second)
        if a != b:
            out.append(r.model_copy(update={"first": a, "second": b}))
    return out


def _test_pairs(
    rs: list[LadderResult], min_games: int, excluded: set[tuple[str, str]]
) -> list[tuple[str, str, int, float, float, float]]:
    """One game's pairings of at least `min_games`: (a, b, games, a's score, expected, p-value),
    each against a fit on the other games less those of the `excluded` pairings."""
    mutual: dict[tuple[str, str], list[LadderResult]] = defaultdict(list)
    for r in rs:
        a, b = sorted((r.first, r.second))
        mutual[(a, b)].append(r)
    accounts = sorted({x for r in rs for x in (r.first, r.second)})
    idx = {x: i for i, x in enumerate(accounts)}
    out = []
    for (a, b), games in sorted(mutual.items()):
        if len(games) < min_games:
            continue
        skip = excluded | {(a, b)}
        others = [r for r in rs if tuple(sorted((r.first, r.second))) not in skip]
        theta, cov = fit(accounts, win_counts(others))
        i, j = idx[a], idx[b]
        p = 1.0 / (1.0 + math.exp(theta[j] - theta[i]))
        score = sum(r.score if r.first == a else 1.0 - r.score for r in games)
        n = len(games)
        var_d = max(0.0, float(cov[i, i] + cov[j, j] - 2 * cov[i, j]))
        pv = max(binomial_two_sided(round(score), n, p), uncertain_p_test(score, n, p, var_d))
        out.append((a, b, n, score, p * n, pv))
    return out


def suspect_pairs(
    results: list[LadderResult],
    account: Callable[[str], str],
    alpha: float = 0.01,
    min_games: int = 10,
    max_flagged: int = 20,
) -> tuple[int, list[SuspectPair]]:
    """(pairings tested, each tested pairing's result): see the module docstring. Step by step:
    the most improbable pairing under the cut is flagged and its games leave every later fit (a
    thrown series inflates the winner's rating, which would make its honest opponents look
    improbable), until no other pairing is under the cut."""
    by_game: dict[str, list[LadderResult]] = defaultdict(list)
    for r in _two_player(results, account):
        by_game[r.game].append(r)
    flagged: dict[str, set[tuple[str, str]]] = defaultdict(set)
    while True:
        tested = [
            (g, *t) for g, rs in sorted(by_game.items()) for t in _test_pairs(rs, min_games, flagged[g])
        ]
        cut = alpha / max(1, len(tested))
        new = [t for t in tested if t[6] < cut and (t[1], t[2]) not in flagged[t[0]]]
        if not new or sum(map(len, flagged.values())) >= max_flagged:
            break
        worst = min(new, key=lambda t: t[6])
        flagged[worst[0]].add((worst[1], worst[2]))
    pairs = [
        SuspectPair(
            game=g,
            first=a,
            second=b,
            games=n,
            score=s,
            expected=e,
            p_value=pv,
            flagged=(a, b) in flagged[g],
        )
        for g, a, b, n, s, e, pv in tested
    ]
    return len(tested), sorted(pairs, key=lambda x: (not x.flagged, x.p_value))


def one_sided_forfeits(
    results: list[LadderResult], account: Callable[[str], str], min_forfeits: int = 3
) -> list[OneSidedForfeits]:
    """Accounts whose faulted matches are all against one opponent, that also played others."""
    faulted: dict[str, Counter[str]] = defaultdict(Counter)
    played: dict[str, Counter[str]] = defaultdict(Counter)
    for r in results:
        seats = r.seats or [r.first, r.second]
        accts = [account(e) for e in seats]
        for e, acct in zip(seats, accts, strict=True):
            opponents = {o for o in accts if o != acct}
            if len(opponents) != 1:
                continue  # N-player matches and one account's own games say nothing here
            (opp,) = opponents
            played[acct][opp] += 1
            if e in r.faults:
                faulted[acct][opp] += 1
    out = []
    for acct, by_opp in sorted(faulted.items()):
        others = sum(n for o, n in played[acct].items() if o not in by_opp)
        if len(by_opp) == 1 and by_opp.total() >= min_forfeits and others > 0:
            (opp,) = by_opp
            out.append(
                OneSidedForfeits(account=acct, opponent=opp, forfeits=by_opp[opp], other_matches=others)
            )
    return out


def audit(
    results: list[LadderResult],
    account: Callable[[str], str],
    alpha: float = 0.01,
    min_games: int = 10,
    min_forfeits: int = 3,
) -> Audit:
    n, pairs = suspect_pairs(results, account, alpha, min_games)
    return Audit(
        alpha=alpha, pairs_tested=n, pairs=pairs, forfeits=one_sided_forfeits(results, account, min_forfeits)
    )
