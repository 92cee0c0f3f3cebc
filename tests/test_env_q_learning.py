"""The worked example of docs/env.md: tabular Q-learning through the bus (research/rl/q_learning.py)
learns against a real `random` agent (its greedy payoff rises), and the learned table, deployed as
an ordinary `policy_table` agent, plays and is rated in a tournament run by `spielbus run`'s code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from research.rl.q_learning import QTable, export_table, play, rate, summary
from spielbus.env import BusVectorEnv
from tests.env_helpers import config

pytestmark = pytest.mark.slow


def test_q_learning_through_the_bus_improves_and_deploys_as_an_agent(nats_url: str, tmp_path: Path) -> None:
    cfg = config(run_dir=tmp_path)
    table = QTable(seed=0)
    env = BusVectorEnv(cfg, num_envs=4, seat=None, nats_url=nats_url, learner="q-learner")
    try:
        before = summary(play(env, table, 150, ["rand"], learn=False, seed=10))
        play(env, table, 1200, ["rand"], learn=True, seed=100)
        after = summary(play(env, table, 150, ["rand"], learn=False, seed=10))
    finally:
        env.close()
    assert after["mean"] > before["mean"] + 0.15, (before, after)
    out = tmp_path / "q.jsonl"
    assert export_table(table, out, "tic_tac_toe") == len(table.legal) > 100
    result = rate(cfg, out, str(tmp_path / "rated"), games_per_pairing=4)
    assert not result.failed and len(result.records) == 8
    moves = [m for r in result.records for m in r.moves if m.agent == "q_table"]
    assert (
        sum(1 for m in moves if m.stats is not None and (m.stats.model_extra or {}).get("table"))
        > len(moves) / 2
    )
    standings = {s["agent"]: s for s in json.loads((result.path / "standings.json").read_text())}
    assert standings["q_table"]["points"] > standings["rand"]["points"]
