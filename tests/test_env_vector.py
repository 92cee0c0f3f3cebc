"""Gymnasium's vector API over the bus (spielbus.env.BusVectorEnv): several matches at once on one
session, batched spaces, NEXT_STEP autoreset, one record per finished episode, nothing left running."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from spielbus.env import BusVectorEnv
from tests.env_helpers import config

pytestmark = pytest.mark.slow


def test_many_matches_at_once_with_next_step_autoreset(nats_url: str, tmp_path: Path) -> None:
    n = 4
    env = BusVectorEnv(config(run_dir=tmp_path), num_envs=n, nats_url=nats_url, learner="vec-learner")
    session = env.session
    try:
        assert env.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
        obs, info = env.reset(seed=0)
        assert obs["action_mask"].shape == (n, 9) and obs["observation"].shape == (n, 27)
        assert obs in env.observation_space and len(set(info["match_id"])) == n
        rng = np.random.default_rng(0)
        ended = 0
        resetting = np.zeros(n, np.bool_)
        for _ in range(40):
            actions = np.array([rng.choice(np.flatnonzero(m)) if m.any() else 0 for m in obs["action_mask"]])
            obs, rewards, term, trunc, info = env.step(actions)
            # An episode that ended is reset by the next step: reward 0 and a fresh board then.
            assert np.all(rewards[resetting] == 0) and np.all(obs["action_mask"][resetting].sum(axis=1) >= 8)
            assert np.all(np.isin(rewards[term], (-1.0, 0.0, 1.0)))
            assert np.all(obs["action_mask"][term].sum(axis=1) == 0)
            ended += int(term.sum())
            resetting = term | trunc
        assert ended >= n  # each tic-tac-toe match ends within 5 learner steps
        with pytest.raises(ValueError, match="out of range"):
            env.step(np.array([0] * (n - 1) + [9]))  # refused whole: no sub-environment has sent
    finally:
        env.close()
    records = [json.loads(line) for line in session.folder.matches.read_text().splitlines()]
    # Every finished episode, plus the matches still live at close (abandoned, then recorded).
    assert len(records) >= ended and all(r["training"] for r in records)
    assert not session.alive() and not any(p.alive() for p in session._processes)
