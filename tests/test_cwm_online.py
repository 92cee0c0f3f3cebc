"""Table 1's online columns (research/cwm/online.py): every step of the matches an agent played,
the final one included, so a tic-tac-toe model without diagonal wins does not score 1.0."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from agents.cwm.model_dir import load_meta
from agents.cwm.sandbox import SandboxUnavailable, check_available
from bus.protocol import GameSpec, MatchRecord, MoveRecord
from games.loader import load_game
from games.view import action_text
from research.cwm.model_files import write_reference_dir
from research.cwm.online import online_accuracy, played_matches

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)

REPO = Path(__file__).resolve().parents[1]
DIAGONAL = [0, 1, 4, 2, 8]  # x(0,0) o(0,1) x(1,1) o(0,2) x(2,2): x wins on the diagonal
ROW = [0, 3, 1, 4, 2]  # x wins on the top row


def record(actions: list[int], seats: list[str], k: int, outcome: str = "decisive") -> MatchRecord:
    state = load_game("tic_tac_toe").new_initial_state()
    moves = []
    for t, a in enumerate(actions):
        p = state.current_player()
        moves.append(MoveRecord(turn=t, player=p, action=a, text=action_text(state, p, a), agent=seats[p]))
        state.apply_action(a)
    returns = [float(r) for r in state.returns()]
    return MatchRecord(match_id=f"m{k}", tournament="t", game=GameSpec(name="tic_tac_toe"), seats=seats,
                       seed=k, moves=moves, returns=returns, outcome=outcome)  # fmt: skip


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    recs = [
        record(DIAGONAL, ["gt", "cwm"], 0),
        record(ROW, ["cwm", "gt"], 1),
        record(DIAGONAL, ["gt", "other"], 2),  # not the agent's: left out
        record(DIAGONAL[:3], ["gt", "cwm"], 3, outcome="forfeit"),  # did not reach the end: left out
    ]
    (run / "matches.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in recs))
    return run


def model_dir(tmp_path: Path, diagonals: bool) -> Path:
    d = tmp_path / ("right" if diagonals else "wrong")
    write_reference_dir(d, "tic_tac_toe")
    if not diagonals:
        (d / "model.py").write_text((d / "model.py").read_text() + "\nLINES = LINES[:6]\n")
    return d


def test_played_matches_are_the_agents_finished_ones(run_dir: Path):
    got = played_matches(run_dir, "tic_tac_toe", "cwm")
    assert [(r.match_id, seats) for r, seats in got] == [("m0", [1]), ("m1", [0])]


def test_online_accuracy_counts_the_final_step(tmp_path: Path, run_dir: Path):
    right = model_dir(tmp_path, True)
    row = online_accuracy(right, load_meta(right), run_dir, "cwm")
    assert row["online_matches"] == 2 and row["online_transitions"] == 12  # 6 states per match
    assert row["online_transition_accuracy"] == 1.0 and row["online_inference_accuracy"] is None
    wrong = model_dir(tmp_path, False)
    row = online_accuracy(wrong, load_meta(wrong), run_dir, "cwm")
    # Right at 11 of the 12 steps, wrong at the end of the game a diagonal won.
    assert row["online_transition_accuracy"] == pytest.approx(11 / 12)


def test_eval_prints_the_online_columns(tmp_path: Path, run_dir: Path):
    wrong = model_dir(tmp_path, False)
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    base = [sys.executable, "-m", "research.cwm", "eval", str(wrong), "--games", "2", "--transitions", "10"]
    out = subprocess.run([*base, "--online", str(run_dir), "--agent", "cwm", "--json"],
                         capture_output=True, text=True, env=env, timeout=300)  # fmt: skip
    assert out.returncode == 0, out.stderr
    row = json.loads(out.stdout)
    assert row["online_matches"] == 2 and row["online_transition_accuracy"] < 1.0
    alone = subprocess.run(
        [*base, "--online", str(run_dir)], capture_output=True, text=True, env=env, timeout=300
    )
    assert alone.returncode == 2 and "--online RUN_DIR and --agent NAME go together" in alone.stderr
