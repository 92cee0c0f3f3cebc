"""`spielbus cwm synthesize` with a game that has parameters (issue 25): the trajectory recorder
and the run-folder reader take the game spec, not only a name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from research.cwm import trajectories as T
from research.cwm.record import record

REPO = Path(__file__).resolve().parents[1]
SPEC = "mnk(m=4,n=4,k=3)"


@pytest.mark.slow
def test_recorder_plays_a_game_with_parameters(tmp_path: Path):
    folder = record(SPEC, 1, 3, str(tmp_path))
    trajs = T.from_run_folder(folder, SPEC, 5)
    assert len(trajs) == 2  # one pairing, both seat orders
    # 4x4 boards: the parameters reached the referee.
    assert trajs[0][0]["state"]["text"].count("\n") == 3
    assert T.from_run_folder(folder, "mnk", 5) == []  # the default 3x3 game is another game


@pytest.mark.slow
def test_synthesize_records_a_game_with_parameters(tmp_path: Path):
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "cwm", "synthesize", SPEC, "--llm", "http://127.0.0.1:9/v1",
         "--trajectories", "1", "--budget", "1", "--values", "0", "--out", str(tmp_path / "o")],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    assert "unknown game" not in proc.stderr
    assert proc.returncode != 2, proc.stdout + proc.stderr
    assert f"recording 1 trajectories of {SPEC}" in proc.stdout
