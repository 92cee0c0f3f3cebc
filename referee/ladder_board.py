"""The ladder's leaderboard: per game, each entry's games, Bradley-Terry rating and 95% interval.

`board(results)` rates the stored results (referee/ladder_store.py) of each game with the
ratings' own Bradley-Terry and profile-likelihood intervals (referee/ratings.py) and returns
rows, best first. The same rows feed `spielbus ladder standings`, the live page's leaderboard
and the Prometheus series, so they agree. Live status (in the pool, benched and why) is added by
the ladder service, which knows it.

Limits: the profile intervals cost a few hundred milliseconds for tens of entries; callers
recompute only when a result was added, off the event loop.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from pydantic import BaseModel

from referee.config import RatingsConfig
from referee.ladder_store import LadderResult
from referee.ratings import _Pair, ratings_from_pairs


class BoardRow(BaseModel):
    game: str
    entry: str
    name: str
    games: int
    bt: float
    bt_low: float
    bt_high: float


def game_rows(results: list[LadderResult]) -> list[BoardRow]:
    """One game's rows (all of `results` are taken as that game's), best first."""
    games: Counter[str] = Counter()
    pairs = []
    for i, r in enumerate(results):
        games.update((r.first, r.second))
        pairs.append(_Pair(r.first, r.second, r.score, game="", match=i))
    if not pairs:
        return []
    game = results[0].game
    rated = ratings_from_pairs(pairs, sorted(games), RatingsConfig())
    rows = [
        BoardRow(
            game=game,
            entry=x.agent,
            name=x.agent.split("@", 1)[0],
            games=games[x.agent],
            bt=x.bt,
            bt_low=x.bt_low,
            bt_high=x.bt_high,
        )
        for x in rated
    ]
    return sorted(rows, key=lambda r: -r.bt)


def board(results: list[LadderResult]) -> list[BoardRow]:
    """Every game's rows, games in name order, best first within a game."""
    by_game: dict[str, list[LadderResult]] = defaultdict(list)
    for r in results:
        by_game[r.game].append(r)
    return [row for g in sorted(by_game) for row in game_rows(by_game[g])]
