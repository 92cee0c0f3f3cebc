"""Appendix F of "Code World Models for General Game Playing": rejecting bad models by a
tournament among several syntheses, each match on one player's model (the host); failures make
both players lose; agents more than 10% of the utility range below the best are rejected."""

from __future__ import annotations

from pathlib import Path

import pytest

from agents.cwm.sandbox import SandboxUnavailable, check_available
from research.cwm.model_files import write_reference_dir
from research.cwm.reject import Entrant, _verdict, reject_bad_models

try:
    check_available()
except SandboxUnavailable as exc:  # pragma: no cover - the Makefile installs what it needs
    pytest.skip(str(exc), allow_module_level=True)


def test_the_cut_is_ten_percent_of_the_observed_range():
    es = [Entrant(Path("a"), [2.0, -2.0, 1.0]), Entrant(Path("b"), [1.0, None]), Entrant(Path("c"), [None])]
    r = _verdict(es, 0.1)
    # Failed games score the lowest observed return (-2) for both players.
    assert [e.mean for e in es] == [pytest.approx(1 / 3), -0.5, -2.0]
    assert r.utility_range == 4.0 and r.threshold == pytest.approx(1 / 3 - 0.4)
    assert [e.rejected for e in es] == [False, True, True]


def test_a_model_whose_agent_fails_is_rejected(tmp_path: Path):
    """Two right Kuhn models and one whose inference function raises: its agent gives no valid
    action in every game it plays, so it always loses (and takes its opponent down with it)."""
    folders = []
    for name in ("right_a", "right_b", "broken"):
        d = tmp_path / name
        write_reference_dir(d, "kuhn_poker")
        folders.append(d)
    model = folders[2] / "model.py"
    model.write_text(
        model.read_text() + "\ndef resample_history(h, p, t=False):\n    raise ValueError('no')\n"
    )
    r = reject_bad_models(folders, repeats=2, simulations=10, seed=1)
    broken = r.entrants[2]
    assert broken.rejected and broken.failures == len(broken.payoffs) == 3 * 2 * 2 * 2
    assert broken.mean == min(e.mean for e in r.entrants)
    assert r.kept() and folders[2] not in r.kept()


def test_cli_reject(tmp_path: Path):
    import json
    import subprocess
    import sys

    repo = Path(__file__).resolve().parents[1]
    for name in ("a", "b"):
        write_reference_dir(tmp_path / name, "tic_tac_toe")
    env = {"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    base = [sys.executable, "-m", "research.cwm", "reject"]
    args = [*base, str(tmp_path / "a"), str(tmp_path / "b"), "--repeats", "1", "--simulations", "5", "--json"]
    out = subprocess.run(args, capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    verdict = json.loads(out.stdout)
    assert [e["games"] for e in verdict["entrants"]] == [8, 8] and not any(
        e["failures"] for e in verdict["entrants"]
    )
    one = subprocess.run([*base, str(tmp_path / "a")], capture_output=True, text=True, env=env, timeout=120)
    assert one.returncode == 2 and "two or more folders" in one.stderr
