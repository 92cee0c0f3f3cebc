"""The LLM Coaching loop fed from the bus (research/rl/coach_feed.py): matches played through
BusEnv against a real agent become a `spielbus selfplay` dataset whose every node is a decision the
learner made, with the true history replayed from the referee's record, rollout Q-values and the
eq. 10 reference; the coach's export reads it."""

from __future__ import annotations

from pathlib import Path

import pyspiel
import pytest

import agents.policy_dataset as ds
from research.coach.export import export
from research.rl.coach_feed import decisions, play_uniform, write_dataset
from spielbus.env import BusEnv
from tests.env_helpers import config

pytestmark = pytest.mark.slow


def test_bus_matches_become_a_coaching_dataset(nats_url: str, tmp_path: Path) -> None:
    with BusEnv(
        config("kuhn_poker", run_dir=tmp_path), nats_url=nats_url, learner="coached", seat=None
    ) as env:
        records = play_uniform(env, 6, seed=3)
    assert all(r.training for r in records)
    mine = list(decisions(records, "coached", seed=0))
    out = tmp_path / "bus1"
    n = write_dataset(records, "coached", out, rollouts=8, rollout_policy="random", seed=0)
    assert n == len(mine) >= 6
    meta, nodes = ds.read_nodes(out)
    assert meta.game == "kuhn_poker" and len(nodes) == n
    game = pyspiel.load_game("kuhn_poker")
    for node, cand in zip(nodes, mine, strict=True):
        # The node's true state is the record's history: the learner's own card and the opponent's.
        state = game.new_initial_state()
        for a in cand.history:
            state.apply_action(a)
        assert node.state == str(state) and node.player == state.current_player()
        assert node.infoset == state.information_state_string(node.player)
        assert len(node.q) == len(node.legal) == 2 and abs(sum(node.reference) - 1) < 1e-9
    assert export(out, tmp_path / "trl.jsonl", fmt="trl", source="reference") == n
