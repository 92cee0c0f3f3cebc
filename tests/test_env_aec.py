"""The PettingZoo AEC environment over the bus (spielbus.env.BusAECEnv): PettingZoo's own api_test on
self-play (every seat learning) in an imperfect-information chance game, on one learning seat against
an agent, and on a simultaneous game; rewards at the end; records marked `training`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pettingzoo.test import api_test

from spielbus.env import BusAECEnv
from tests.env_helpers import config

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("game", "learning"), [("kuhn_poker", None), ("tic_tac_toe", [1]), ("goofspiel(num_cards=3)", None)]
)
def test_pettingzoo_api_test_passes(
    nats_url: str, tmp_path: Path, game: str, learning: list[int] | None
) -> None:
    env = BusAECEnv(
        config(game, run_dir=tmp_path), nats_url=nats_url, learner="aec-learner", learning_seats=learning
    )
    try:
        api_test(env, num_cycles=50)
    finally:
        env.close()
    lines = env.session.folder.matches.read_text().splitlines()
    assert lines and all(json.loads(line)["training"] is True for line in lines)


def test_self_play_kuhn_pays_both_seats_at_the_end(nats_url: str, tmp_path: Path) -> None:
    env = BusAECEnv(config("kuhn_poker", run_dir=tmp_path), nats_url=nats_url, learner="aec-selfplay")
    try:
        assert env.possible_agents == ["player_0", "player_1"]
        env.reset(seed=3)
        totals = dict.fromkeys(env.possible_agents, 0.0)
        seen = set()
        for agent in env.agent_iter():
            obs, reward, term, trunc, info = env.last()
            totals[agent] += float(reward)
            if term or trunc:
                assert info["outcome"] == "decisive"
                env.step(None)
                continue
            seen.add(agent)
            assert obs["observation"].shape == (11,) and obs["action_mask"].sum() == 2
            env.step(int(np.flatnonzero(obs["action_mask"])[-1]))  # always bet / call
        assert seen == {"player_0", "player_1"}
        assert totals["player_0"] == -totals["player_1"] and abs(totals["player_0"]) == 2.0
        with pytest.raises(ValueError, match="out of range"):
            env.reset(seed=4)
            env.step(7)
    finally:
        env.close()
    assert not env.session.alive()


def test_per_step_rewards_in_a_game_that_pays_along_the_way(nats_url: str, tmp_path: Path) -> None:
    env = BusAECEnv(config("cliff_walking", run_dir=tmp_path), nats_url=nats_url, learner="aec-cliff")
    try:
        env.reset(seed=1)
        plan = iter([1, 0, 0, 0, 0, 0, 0, 0, 3])  # up, along the cliff's edge, down to the goal
        seen = []
        for agent in env.agent_iter():
            assert agent == "player_0"
            _, reward, term, trunc, info = env.last()
            seen.append(float(reward))
            if term or trunc:
                assert info["returns"] == [-9.0]
                env.step(None)
                continue
            env.step(next(plan))
        assert seen == [0.0] + [-1.0] * 9
    finally:
        env.close()
