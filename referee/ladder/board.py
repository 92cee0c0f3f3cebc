"""The ladder's leaderboard: per game, each entry's games, Bradley-Terry rating and 95% interval
(and openskill's Plackett-Luce mu and sigma for games of more than two players).

`board(results)` rates the stored results (referee/ladder/store.py) of each game with the
tournament's own Bradley-Terry and profile-likelihood intervals (referee/ratings.py's `PairTally`
on referee/bradley_terry.py) and returns rows, best first. The same rows feed `spielbus ladder
standings`, the live page's leaderboard and the Prometheus series, so they agree. Live status (in
the pool, benched and why) is added by the ladder service, which knows it.

Move quality (`Quality`, docs/ladder.md "Move quality"): when the ladder is given the analyst's
`analysis.jsonl` (`spielbus ladder FILE.toml --analysis DIR`), each row also carries the entry's
accuracy, mean winning-chances loss and blunders per 100 moves with their 95% intervals, computed
by the analysis package (which the referee side may not import: the figures are handed in, keyed
by game and entry, and `with_quality` puts them on the rows).

Limits: the profile intervals cost a few hundred milliseconds for tens of entries; callers
recompute only when a result was added, off the event loop.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

from referee.config import RatingsConfig
from referee.ladder.store import LadderResult
from referee.ratings import Pair, PairTally


class Quality(BaseModel):
    """An entry's move quality in one game, over its scored ladder moves (analysis/summary.py's
    figures: bootstrap 95% intervals over matches)."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)
    reference: str
    moves: int = Field(ge=0)
    matches: int = Field(ge=0)
    accuracy: float
    accuracy_low: float
    accuracy_high: float
    mean_loss: float
    mean_loss_low: float
    mean_loss_high: float
    blunders: float = Field(description="blunders per 100 moves")
    blunders_low: float
    blunders_high: float


class BoardRow(BaseModel):
    game: str
    entry: str
    name: str
    games: int
    bt: float
    bt_low: float
    bt_high: float
    players: int = 2
    pl_mu: float | None = None
    pl_sigma: float | None = None
    quality: Quality | None = None


def _comparisons(r: LadderResult, i: int) -> tuple[list[Pair], list[str], list[int]]:
    """A result's pairwise comparisons (every pair of seats by place for N players) and places."""
    if r.seats:
        pairs = [
            Pair(r.seats[a], r.seats[b], 1.0 if ra < rb else 0.0 if ra > rb else 0.5, game="", match=i)
            for a, ra in enumerate(r.ranks)
            for b, rb in enumerate(r.ranks)
            if a < b and r.seats[a] != r.seats[b]
        ]
        return pairs, list(r.seats), list(r.ranks)
    places = [1, 2] if r.score > 0.5 else [2, 1] if r.score < 0.5 else [1, 1]
    return [Pair(r.first, r.second, r.score, game="", match=i)], [r.first, r.second], places


def game_rows(results: list[LadderResult]) -> list[BoardRow]:
    """One game's rows (all of `results` are taken as that game's), best first. Bradley-Terry
    with its interval from the pairwise comparisons; for games of more than two players also
    openskill's Plackett-Luce (mu, sigma) from each match's whole ranking."""
    games: Counter[str] = Counter()
    tally = PairTally(RatingsConfig())
    players = 2
    for i, r in enumerate(results):
        pairs, seats, places = _comparisons(r, i)
        players = max(players, len(seats))
        games.update(set(seats))
        tally.add_match(pairs, seats, places, key=("", ((i, ""),), 1))
    if not games:
        return []
    game = results[0].game
    rows = [
        BoardRow(
            game=game,
            entry=x.agent,
            name=x.agent.split("@", 1)[0],
            games=games[x.agent],
            bt=x.bt,
            bt_low=x.bt_low,
            bt_high=x.bt_high,
            players=players,
            pl_mu=x.pl_mu if players > 2 else None,
            pl_sigma=x.pl_sigma if players > 2 else None,
        )
        for x in tally.ratings(sorted(games))
    ]
    return sorted(rows, key=lambda r: -r.bt)


def board(results: list[LadderResult]) -> list[BoardRow]:
    """Every game's rows, games in name order, best first within a game."""
    by_game: dict[str, list[LadderResult]] = defaultdict(list)
    for r in results:
        by_game[r.game].append(r)
    return [row for g in sorted(by_game) for row in game_rows(by_game[g])]


def with_quality(rows: list[BoardRow], quality: Mapping[tuple[str, str], Quality]) -> list[BoardRow]:
    """The rows with each entry's move quality (keyed by game and entry) where there is one."""
    return [r.model_copy(update={"quality": quality.get((r.game, r.entry))}) for r in rows]
