"""Gymnasium's vector API over the bus (spielbus.env.BusVectorEnv): several matches at once on one
session, batched spaces, NEXT_STEP autoreset, one record per finished episode, nothing left running."""

from __future__ import annotations

import json
import time
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


def test_answers_after_the_deadline_are_marked_late_and_recorded_as_timeouts(
    nats_url: str, tmp_path: Path
) -> None:
    # One hand-off carries every sub-environment's answer (BusEnv.send_batch); an answer whose turn
    # already timed out must still say so in its info, and the referee records the timeouts.
    n = 3
    cfg = config(run_dir=tmp_path, deadline_ms=300)
    env = BusVectorEnv(cfg, num_envs=n, nats_url=nats_url, learner="vec-late")
    matches = env.session.folder.matches
    try:
        _, info = env.reset(seed=3)
        ids = list(info["match_id"])
        time.sleep(1.5)  # past every learner turn's 300 ms clock: each match is forfeited meanwhile
        _, _, term, _, info = env.step(np.zeros(n, np.int64))
        assert info["_late"].all() and info["late"].all()
        assert term.all() and list(info["outcome"]) == ["forfeit"] * n
    finally:
        env.close()
    records = [json.loads(line) for line in matches.read_text().splitlines()]
    faults = {r["match_id"]: [f["reason"] for f in r["faults"]] for r in records if r["match_id"] in ids}
    assert faults == {m: ["timeout"] for m in ids}
