"""An LLM agent whose model never gives a usable answer must not pass for a working one: its moves
are marked fallbacks, the standings say so, and `spielbus run` fails unless the tournament file
allows it. (An unreachable server is the provider's failure, not the model's: `[policy] provider`.)
The model is the OpenAI-compatible stand-in of tests/llm_standins.py, answering prose with no move."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bus.protocol import GameSpec, MatchRecord, MoveRecord, MoveStats
from referee.ratings import standings
from tests.llm_standins import OpenAIStandIn, Scene, spielbus_run

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


async def _run(tmp_path: Path, allow: bool) -> tuple[int, str, dict]:
    prose = OpenAIStandIn()  # every answer is prose naming no move: the model's bad output
    prose.default = Scene(content="The centre is the best square.")
    url = await prose.start()
    cfg = tmp_path / f"t-{allow}.toml"
    cfg.write_text(
        f'name = "fallbacks"\ngames_per_pairing = 1\nseed = 3\ndeadline_ms = 5000\n'
        f"allow_fallbacks = {'true' if allow else 'false'}\n"
        '[[games]]\nname = "tic_tac_toe"\n'
        '[agents.rnd]\nkind = "random"\n'
        '[agents.llm]\nkind = "llm_policy"\n'
        f'options = {{ llm = {{ base_url = "{url}", cache = false, timeout_s = 2.0 }} }}\n'
    )
    try:
        code, text = await spielbus_run(cfg, tmp_path / f"runs-{allow}")
    finally:
        await prose.stop()
    (summary,) = (tmp_path / f"runs-{allow}").glob("fallbacks-*/summary.json")
    return code, text, json.loads(summary.read_text())


@pytest.mark.slow
async def test_run_fails_when_most_moves_were_fallbacks(tmp_path: Path) -> None:
    code, text, summary = await _run(tmp_path, allow=False)
    assert code == 1, text[-3000:]
    assert summary["mostly_fallbacks"] == ["llm"]
    assert "were fallbacks" in text and "allow_fallbacks" in text


@pytest.mark.slow
async def test_allow_fallbacks_accepts_them(tmp_path: Path) -> None:
    code, text, summary = await _run(tmp_path, allow=True)
    assert code == 0, text[-3000:]
    assert summary["mostly_fallbacks"] == ["llm"]  # still reported, just not a failure
