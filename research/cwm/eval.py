"""Held-out accuracy of a synthesized model (section 5.1 of "Code World Models for General Game
Playing"): `transitions` transitions sampled from `games` fresh games on the true game, each
player random or (with probability `mcts_share`, 0.5 as in the paper) OpenSpiel's MCTS / IS-MCTS
with 50 simulations on the true game; each transition is a unit
test run in the sandbox against DIR/model.py; for imperfect-information games also the
inference tests of the same games (open or closed deck as synthesized). The train columns
come from DIR/report.json.

`test_mcts_share` is the share of held-out seats MCTS actually played (`test_mcts_share_asked` the
probability asked for): 0 for our Python games (Quadranto, Hand of war...), which OpenSpiel's C++
bots cannot drive, so their held-out players are all random. A synthesis that wrote no code
(no model.py) scores 0 on every test it has (`failure` says so), not "n/a".
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from agents.cwm.model_dir import load_report
from games.loader import load_game
from research.cwm import trajectories as T
from research.cwm.candidate import run_model

MAX_INFERENCE_CASES = 500


def evaluate(
    folder: Path, meta: dict[str, Any], *, games: int, transitions: int, seed: int, mcts_share: float = 0.5
) -> dict[str, Any]:
    report = load_report(folder)
    model = folder / "model.py"
    code = model.read_text() if model.is_file() else None
    game = load_game(meta["game"])
    trajs, share = T.held_out_games(meta["game"], games, seed, mcts_share)
    rng = random.Random(seed)
    trans = T.transition_tests(trajs, "heldout")
    if len(trans) > transitions:
        trans = rng.sample(trans, transitions)
    tests: list[dict[str, Any]] = [] if meta["closed_deck"] else list(trans)
    inf: list[dict[str, Any]] = []
    if meta["imperfect"]:
        inf = T.inference_tests(
            trajs, game.num_players(), meta["closed_deck"], "heldout_inference", T.spec_of(game),
            meta.get("inference", "history"),
        )  # fmt: skip
        if len(inf) > MAX_INFERENCE_CASES:
            inf = rng.sample(inf, MAX_INFERENCE_CASES)
        init = T.initial_state(game)
        for t in inf:
            t["initial_state"] = init
        tests += inf
    run = run_model(code, tests, meta)
    return {
        "game": meta["game"],
        "deck": "closed" if meta["closed_deck"] else "open",
        "train_transition_accuracy": report.get("train_transition_accuracy"),
        "test_transition_accuracy": None if meta["closed_deck"] else run.accuracy("transition"),
        "train_inference_accuracy": report.get("train_inference_accuracy"),
        "test_inference_accuracy": run.accuracy("inference") if meta["imperfect"] else None,
        "llm_calls": report.get("llm_calls"),
        "test_games": games,
        "test_mcts_share": share,
        "test_mcts_share_asked": mcts_share,
        "test_transitions": 0 if meta["closed_deck"] else len(trans),
        "test_inference_cases": len(inf),
        "failure": run.verdict.summary() if run.verdict.reason else None,
    }
