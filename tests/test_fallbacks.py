"""An LLM agent whose server is unreachable must not pass for a working one: its moves are marked
fallbacks, the standings say so, and `spielbus run` fails unless the tournament file allows it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bus.process import free_port
from bus.protocol import GameSpec, MatchRecord, MoveRecord, MoveStats
from referee.ratings import standings

ROOT = Path(__file__).resolve().parents[1]


def _record(fallback_moves: int, model_moves: int) -> MatchRecord:
    moves = [
        MoveRecord(
            turn=i, player=0, action=0, text="x", agent="llm", stats=MoveStats.model_validate({"fallback": 1})
        )
        for i in range(fallback_moves)
    ]
    moves += [MoveRecord(turn=100 + i, player=0, action=0, text="x", agent="llm") for i in range(model_moves)]
    return MatchRecord(
        match_id="m",
        tournament="t",
        game=GameSpec(name="tic_tac_toe"),
        seats=["llm", "r"],
        seed=1,
        moves=moves,
    )


def test_standings_count_fallback_moves() -> None:
    (row,) = [s for s in standings([_record(3, 1)]) if s.agent == "llm"]
    assert (row.moves, row.fallbacks) == (4, 3) and row.mostly_fallbacks
    (row,) = [s for s in standings([_record(2, 2)]) if s.agent == "llm"]
    assert not row.mostly_fallbacks  # half is not most


def _run(tmp_path: Path, allow: bool) -> tuple[int, str, dict]:
    dead = free_port()  # nothing listens here: every LLM request fails at once
    cfg = tmp_path / f"t-{allow}.toml"
    cfg.write_text(
        f'name = "fallbacks"\ngames_per_pairing = 1\nseed = 3\ndeadline_ms = 5000\n'
        f"allow_fallbacks = {'true' if allow else 'false'}\n"
        '[[games]]\nname = "tic_tac_toe"\n'
        '[agents.rnd]\nkind = "random"\n'
        '[agents.llm]\nkind = "llm_policy"\n'
        f'options = {{ llm = {{ base_url = "http://127.0.0.1:{dead}/v1", retries = 0, timeout_s = 2.0 }} }}\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "run", str(cfg), "--run-dir", str(tmp_path / f"runs-{allow}"),
         "--quiet", "--metrics-port", "off", "--web-port", "off"],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    (summary,) = (tmp_path / f"runs-{allow}").glob("fallbacks-*/summary.json")
    return out.returncode, out.stdout + out.stderr, json.loads(summary.read_text())


@pytest.mark.slow
def test_run_fails_when_most_moves_were_fallbacks(tmp_path: Path) -> None:
    code, text, summary = _run(tmp_path, allow=False)
    assert code == 1, text[-3000:]
    assert summary["mostly_fallbacks"] == ["llm"]
    assert "were fallbacks" in text and "allow_fallbacks" in text


@pytest.mark.slow
def test_allow_fallbacks_accepts_them(tmp_path: Path) -> None:
    code, text, summary = _run(tmp_path, allow=True)
    assert code == 0, text[-3000:]
    assert summary["mostly_fallbacks"] == ["llm"]  # still reported, just not a failure
