"""From a tournament file to the list of match specs it plays.

Two-player games: every pairing (round robin) or every challenger against every
champion (gauntlet), `games_per_pairing` matches per seat order, both orders by
default. Games of N > 2 players: every group of N agents (a single group when
there are exactly N), `games_per_pairing` matches each, seat order shuffled per
match by the tournament's seeded RNG. Each match gets its own seed, and its own
chance secret (`MatchTerms.spec`, referee/terms.py, the ladder's spec builder too;
docs/referee.md). Chess with an opening set (`openings`): every opening, both colour
assignments, per pairing, through the game's `fen` parameter. SPRT (`format = "sprt"`):
`max_pairs` game pairs, each two matches with the seats swapped and the same seed (and, for chess
with openings, the same opening, in turn); `spielbus.sprt_run` submits them pair by pair and stops
when decided.
"""

from __future__ import annotations

import itertools
import random

from bus.protocol import MatchSpec
from games.chess.openings import opening_params
from games.loader import GameSpecError
from games.probe import check_game
from referee.config import ConfigError, TournamentConfig, check_schedule_size


def check_games(config: TournamentConfig) -> list[int]:
    """Start every game once (`games.probe`); return their player counts. A bad game, or a schedule
    larger than `max_matches`, is a ConfigError naming it."""
    counts = []
    for i, spec in enumerate(config.games):
        try:
            n = check_game(spec)
        except GameSpecError as exc:
            raise ConfigError(f"games[{i}] ({spec.label()}): {exc}") from exc
        if n > len(config.agents):
            raise ConfigError(
                f"games[{i}] ({spec.label()}) needs {n} players but the tournament has "
                f"{len(config.agents)} agents"
            )
        counts.append(n)
    if config.format == "sprt" and counts != [2]:
        raise ConfigError(f"format 'sprt' needs a two-player game; {config.games[0].label()} has {counts[0]}")
    check_schedule_size(config, counts)
    return counts


def _groups(config: TournamentConfig, n: int) -> list[tuple[str, ...]]:
    names = list(config.agents)
    if n == 2 and config.format == "gauntlet":
        challengers = [a for a in names if a not in config.champions]
        pairs: list[tuple[str, ...]] = [(c, ch) for ch in config.champions for c in challengers]
        pairs += list(itertools.combinations(config.champions, 2))
        return pairs
    return list(itertools.combinations(names, n))


def build_schedule(config: TournamentConfig, tournament_id: str) -> list[MatchSpec]:
    counts = check_games(config)
    rng = random.Random(config.seed)
    specs: list[MatchSpec] = []

    def add(game_index: int, seats: list[str], opening: str | None = None, seed: int | None = None) -> None:
        game = config.games[game_index]
        if opening is not None:
            # `fen` starts the match; `opening` (a move sequence's UCI moves) lets PGN show them.
            game = game.model_copy(update={"params": {**game.params, **opening_params(opening)}})
        match_id = f"{tournament_id}-{len(specs):05d}"
        specs.append(
            config.spec(match_id, tournament_id, game, seats, rng.randrange(2**31) if seed is None else seed)
        )

    if config.format == "sprt":
        tested, baseline = list(config.agents)
        chess_openings = config.openings if config.games[0].name == "chess" else []
        for k in range(config.sprt_config.max_pairs):
            # A pair: one start (opening, seed), both seat orders.
            opening = chess_openings[k % len(chess_openings)] if chess_openings else None
            seed = rng.randrange(2**31)
            add(0, [tested, baseline], opening, seed)
            add(0, [baseline, tested], opening, seed)
        return specs

    for gi, n in enumerate(counts):
        for group in _groups(config, n):
            if n == 2 and config.openings and config.games[gi].name == "chess":
                # An opening set: every opening with both colour assignments, per pairing.
                for opening in config.openings:
                    for order in (list(group), list(reversed(group))):
                        for _ in range(config.games_per_pairing):
                            add(gi, order, opening)
            elif n == 2:
                orders = [list(group), list(reversed(group))] if config.both_seat_orders else [list(group)]
                for order in orders:
                    for _ in range(config.games_per_pairing):
                        add(gi, order)
            else:
                for _ in range(config.games_per_pairing):
                    seats = list(group)
                    rng.shuffle(seats)
                    add(gi, seats)
    return specs
