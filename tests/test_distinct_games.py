"""Seeded agents play distinct but reproducible games (issue 26).

Before, `decision_rng` depended on the agent's seed and what the seat knew, and nothing of the
match: two seeded deterministic agents meeting in the same seats played the same game every
time, so a "20 games" win rate rested on one game. Now the referee sends each turn the match's
`match_seed` (the schedule's per-match seed, from the tournament seed and the match's place in
the schedule) and `decision_rng` mixes it in. Played here through the real referee and agent
runtime on a real nats-server.
"""

from __future__ import annotations

import pytest
from nats.aio.client import Client as NATS

from agents.mcts_agent import MctsOptions, MctsStrategy
from referee.config import TournamentConfig
from referee.schedule import build_schedule
from tests.helpers import play, serving, uid


def _config() -> TournamentConfig:
    return TournamentConfig.model_validate(
        {
            "name": "distinct",
            "seed": 7,
            "games_per_pairing": 10,  # x 2 seat orders = 20 matches
            "games": [{"name": "tic_tac_toe"}],
            "agents": {"m1": {"kind": "mcts"}, "m2": {"kind": "mcts"}},
        }
    )


async def _games(nc: NATS, a: str, b: str) -> list[tuple[tuple[str, ...], tuple[int, ...]]]:
    specs = build_schedule(_config(), uid("distinct"))
    specs = [s.model_copy(update={"seats": [a if x == "m1" else b for x in s.seats]}) for s in specs]
    out = []
    for spec in specs:
        record = await play(nc, spec)
        out.append((tuple(spec.seats), tuple(m.action for m in record.moves)))
    return out


@pytest.mark.slow
async def test_seeded_mcts_pair_plays_distinct_games_and_a_rerun_plays_them_again(nc: NATS) -> None:
    a, b = uid("mcts-a"), uid("mcts-b")
    # Few simulations: the search is deterministic in its count, not in wall-clock time.
    ma = MctsStrategy(MctsOptions(seed=1, simulations=60, rollouts=2))
    mb = MctsStrategy(MctsOptions(seed=2, simulations=60, rollouts=2))
    async with serving(nc, ma, a), serving(nc, mb, b):
        first = await _games(nc, a, b)
        second = await _games(nc, a, b)
    assert len(first) == 20
    distinct = len(set(first))
    assert distinct >= 10, f"only {distinct} distinct games in 20"
    assert first == second  # the same tournament seed: the same games, match by match
