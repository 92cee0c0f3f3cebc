"""Table 1's *online* columns of "Code World Models for General Game Playing" (Lehrach, Hennes,
Lázaro-Gredilla et al., section 5.1): the transitions observed while an agent played, used
again to assess the model.

From a run folder's `matches.jsonl`, every match of the model's game in which `agent` sat and
which ran to the game's end (or to the turn limit) is replayed on the true game, and every one
of its steps, the final one included, becomes a test as in `spielbus cwm eval`: transition
tests (open deck: the record's `ended` event reveals the whole history) and, for
imperfect-information games, the inference tests of the agent's seats (closed deck: also at the
terminal observation). So a tic-tac-toe model without diagonal wins, right at every turn the
agent saw, fails at the games a diagonal ended. The agent's own running figure
(`online_transition_accuracy` in its move stats, `agents.cwm.agent`) counts the same steps of
its turns and, from `match_ended`, each match's final step; this one is the table's.

Limits: matches forfeited or failed are left out (their last state is not the game's end);
every test runs in one sandbox, at most `MAX_CASES` of each kind (sampled with `seed`).
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from bus.protocol import MatchRecord
from games.loader import load_game, parse_spec
from research.cwm import trajectories as T
from research.cwm.candidate import run_model

MAX_CASES = 10000
FINISHED = ("decisive", "draw", "max_turns")


def played_matches(run_dir: Path, game: str, agent: str) -> list[tuple[MatchRecord, list[int]]]:
    """The finished matches of `game` in the run folder where `agent` sat, each with its seats."""
    path = Path(run_dir) / "matches.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no such file (a run folder has matches.jsonl)")
    label = parse_spec(game).label()
    out = []
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        rec = MatchRecord.model_validate_json(line)
        seats = [i for i, name in enumerate(rec.seats) if name == agent]
        if seats and rec.game.label() == label and rec.outcome in FINISHED and not rec.error:
            out.append((rec, seats))
    return out


def online_tests(
    meta: dict[str, Any], matches: list[tuple[MatchRecord, list[int]]], seed: int
) -> list[dict[str, Any]]:
    """The unit tests of every step of `matches` (see the module docstring)."""
    game = load_game(meta["game"])
    rng = random.Random(seed)
    tests: list[dict[str, Any]] = []
    inference: list[dict[str, Any]] = []
    for k, (rec, seats) in enumerate(matches):
        steps = T.replay_ids(game, [m.action for m in rec.moves])
        if not meta["closed_deck"]:
            tests += T.transition_tests([steps], f"online_{k}")
        if meta["imperfect"]:
            n, closed = game.num_players(), meta["closed_deck"]
            how = meta.get("inference", "history")
            cases = T.inference_tests([steps], n, closed, f"online_inference_{k}", T.spec_of(game), how)
            inference += [t for t in cases if t["player_id"] in seats]
    if len(tests) > MAX_CASES:
        tests = rng.sample(tests, MAX_CASES)
    if len(inference) > MAX_CASES:
        inference = rng.sample(inference, MAX_CASES)
    init = T.initial_state(game)
    for t in inference:
        t["initial_state"] = init
    return tests + inference


def online_accuracy(
    folder: Path, meta: dict[str, Any], run_dir: Path, agent: str, seed: int = 0
) -> dict[str, Any]:
    """`online_transition_accuracy` (None for a closed deck), `online_inference_accuracy` (None for
    perfect information), the counts behind them, and the failure of the model's code if any."""
    matches = played_matches(run_dir, meta["game"], agent)
    tests = online_tests(meta, matches, seed)
    n_trans = sum(1 for t in tests if t["kind"] == "transition")
    n_inf = len(tests) - n_trans
    row: dict[str, Any] = {
        "online_matches": len(matches),
        "online_transitions": n_trans,
        "online_inference_cases": n_inf,
        "online_transition_accuracy": None,
        "online_inference_accuracy": None,
        "online_failure": None,
    }
    if not tests:
        return row
    code = (Path(folder) / "model.py").read_text()
    run = run_model(code, tests, meta)
    row["online_transition_accuracy"] = run.accuracy("transition") if n_trans else None
    row["online_inference_accuracy"] = run.accuracy("inference") if n_inf else None
    row["online_failure"] = run.verdict.summary() if run.verdict.reason else None
    return row
