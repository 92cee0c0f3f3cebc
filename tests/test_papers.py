"""`spielbus paper`: each paper's quick report at its smallest sizes, through the real referee.

Minimax Tree of Thoughts is run with an Ollama-API stand-in server (named so: not a model) in place of
the embedded model, which needs minutes per game on two cores; the referee, NATS and the agents are real.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from research.papers.cells import Cell, score_of, wilson
from research.papers.llm_spec import llm_section
from research.papers.minimax_tot import config
from research.papers.registry import NOT_YET
from tests.llm_standins import OllamaStandIn

REPO = Path(__file__).resolve().parents[1]


def _paper(tmp_path: Path, *args: str, url: str = "") -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    return subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "paper", *args, *(["--llm", f"ollama:{url}"] if url else [])],
        capture_output=True, text=True, env=env, timeout=800,
    )  # fmt: skip


def test_paper_scale_has_the_papers_sizes() -> None:
    llm = llm_section(None, "smollm2")
    ghost, chain = config("ghost", "paper", llm), config("word_chain", "paper", llm)
    assert ghost.games_per_pairing == 50 and ghost.both_seat_orders  # 100 games
    assert len(chain.games) == 26 and chain.games_per_pairing == 1 and chain.both_seat_orders  # 52 games
    opts = ghost.agents["minimax_tot"].options
    assert opts["depth"] == 3 and opts["rollouts"] == 3 and opts["temperature"] == 0.5


def test_wilson_interval_and_bad_llm_spec() -> None:
    low, high = wilson(81, 100)
    assert 0.72 < low < 0.81 < high < 0.88
    assert wilson(0, 0) == (0.0, 1.0)
    assert llm_section("ollama:http://h:1", "m")["backend"] == "ollama"
    with pytest.raises(Exception, match="--llm"):
        llm_section("nonsense", "m")
    assert score_of([], "a") == (0, 0, 0)


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_minimax_tot_quick_report_every_cell_has_a_run(tmp_path: Path) -> None:
    standin = OllamaStandIn()
    await standin.start()
    out = tmp_path / "report"
    try:
        proc = await asyncio.to_thread(
            _paper, tmp_path, "minimax_tot", "--games", "1", "--out", str(out), url=standin.url
        )
        assert proc.returncode == 0, proc.stderr + proc.stdout
        assert standin.requests  # the agents asked the stand-in: the LLM path ran
        again = await asyncio.to_thread(
            _paper, tmp_path, "minimax_tot", "--games", "1", "--out", str(out), "--resume", url=standin.url
        )
    finally:
        await standin.stop()
    assert again.returncode == 0, again.stderr
    cells = [Cell.model_validate(c) for c in json.loads((out / "cells.json").read_text())]
    assert [c.name for c in cells] == ["ghost", "word_chain"]
    for c in cells:
        assert c.score is not None and c.games == 2, c
        records = (out / c.run / "matches.jsonl").read_text().splitlines()
        assert len(records) == c.games  # the number comes from the run folder's matches
        assert c.model == "smollm2" and c.policy == "random"
    # --resume kept the finished cells: still one run folder each.
    assert all(len(list((out / "runs" / c.name).iterdir())) == 1 for c in cells)
    report = (out / "report.md").read_text()
    assert "81%" in report and "71%" in report and "Table 1" in report
    assert (out / "win_rates.png").stat().st_size > 0 and (out / "win_rates.svg").exists()
    assert "report:" in proc.stdout


@pytest.mark.parametrize("name", sorted(NOT_YET))
def test_unmeasured_papers_say_why(tmp_path: Path, name: str) -> None:
    proc = _paper(tmp_path, name, "--out", str(tmp_path / name))
    assert proc.returncode == 0, proc.stderr
    cells = json.loads((tmp_path / name / "cells.json").read_text())
    assert all(c["score"] is None and c["why"] for c in cells)
    assert "not measured:" in (tmp_path / name / "report.md").read_text()
