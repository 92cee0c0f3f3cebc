"""`SB3BusVecEnv` (spielbus/env/sb3.py): sb3-contrib's MaskablePPO trains on many bus matches at once,
against a real `random` agent on a real nats-server, every match refereed and recorded."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from sb3_contrib import MaskablePPO

from spielbus.env.sb3 import SB3BusVecEnv
from tests.env_helpers import config

pytestmark = pytest.mark.slow


def test_maskable_ppo_trains_on_concurrent_bus_matches_and_only_plays_legal_moves(
    nats_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch.set_num_threads(1)
    # SB3's silent logger still makes a folder, by default a new one in the system's temp folder
    # per `learn()`: here it is the test's own.
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3"))
    venv = SB3BusVecEnv(config(run_dir=tmp_path), nats_url=nats_url, learner="learner-sb3", num_envs=4)
    dones: list[dict] = []
    try:
        obs = venv.reset()
        assert obs["action_mask"].shape == (4, 9) and (obs["action_mask"].sum(axis=1) >= 8).all()
        masks = venv.env_method("action_masks")
        assert all(m.dtype == np.bool_ for m in masks) and venv.has_attr("action_masks")
        with pytest.raises(AttributeError):
            venv.env_method("render")

        # SB3's convention: a done sub-environment is reset in the same step, its last view kept.
        for _ in range(40):
            actions = np.array([int(np.flatnonzero(m)[0]) for m in venv.env_method("action_masks")])
            obs, rewards, done, infos = venv.step(actions)
            for i in np.flatnonzero(done):
                assert "terminal_observation" in infos[i] and infos[i]["TimeLimit.truncated"] is False
                assert rewards[i] == infos[i]["returns"][0]
                assert obs["action_mask"][i].sum() >= 8  # the new match's first view
                dones.append(infos[i])
        assert dones

        model = MaskablePPO(
            "MultiInputPolicy", venv, n_steps=64, batch_size=64, n_epochs=2, seed=0, device="cpu"
        )
        model.learn(total_timesteps=256)
        assert model.num_timesteps >= 256
        records = venv.session.folder.read_records()
    finally:
        venv.close()
    # Every match was the referee's, and the masked learner never played an illegal move.
    learner_games = [r for r in records if "learner-sb3" in r.seats]
    assert len(learner_games) >= len(dones) + 256 // 9
    assert not [
        f for r in learner_games for f in r.faults if f.agent == "learner-sb3" and f.reason == "illegal"
    ]
