"""`spielbus paper cwm` and `spielbus paper coaching`, and `--llm NAME --llm-config FILE`.

The cwm report runs at its smallest sizes through the real referee, NATS and sandbox: once on the
hand-written reference model (no --llm), once with synthesis by `research.cwm` against an Ollama-API
stand-in server (named so: not a model; it answers a synthesis prompt with the reference code and a
move prompt with the first legal action), since the embedded 135M model cannot write code.
The coaching report's training needs the `train` extra and minutes; here its absent-extra cell and
its reading of a `table1` result are tested (docs/papers.md has the measured run).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agents.cwm.reference import reference_code
from referee.config import ConfigError
from research.papers import coaching, cwm_paper
from research.papers.cells import Cell
from research.papers.cwm_paper import TABLES, CwmReport, Sizes, calls_curves, extra
from research.papers.llm_spec import llm_section, synthesis_llm
from research.papers.numbers import paper_numbers
from research.papers.report import write_markdown
from tests.llm_standins import OllamaStandIn, _default_answer

REPO = Path(__file__).resolve().parents[1]


def _args(**kw: Any) -> argparse.Namespace:
    base = {"table": None, "llm": None, "llm_config": None, "model": "smollm2", "scale": "quick"}
    return argparse.Namespace(**{**base, "resume": False, "games": 1, **kw})


@pytest.fixture
def smallest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The smallest sizes that still play and evaluate: 10 simulations, 4 held-out games."""
    monkeypatch.setitem(cwm_paper.SIZES, "quick", Sizes(1, 3, 1, 10, 1, 10_000, 4, 100))


def _check_sources(out: Path, cells: list[Cell]) -> None:
    """Every number has its source: a run folder with the matches, or the model folders with eval.json."""
    for c in cells:
        if c.score is None:
            assert c.why and not c.run, c
            continue
        assert c.run and (out / c.run).is_dir(), c
        if c.unit in ("share", "payoff"):
            lines = (out / c.run / "matches.jsonl").read_text().splitlines()
            assert len(lines) == c.games == 2 and c.policy == "forfeit", c
        elif c.name.endswith("test_transition") or c.name.endswith("test_inference"):
            for folder in c.note.removeprefix("model folders ").split(" (")[0].split(", "):
                assert json.loads((out / folder / "eval.json").read_text())["failure"] is None


def test_named_llm_section(tmp_path: Path) -> None:
    toml = tmp_path / "t.toml"
    toml.write_text(
        '[llm.big]\nbackend = "ollama"\nbase_url = "http://h:1"\nmodel = "qwen"\n'
        '[llm.bad]\nbackend = "nope"\n[agents.a]\nkind = "random"\n'
    )
    assert llm_section("big", "smollm2", str(toml)) == {
        "backend": "ollama",
        "base_url": "http://h:1",
        "model": "qwen",
    }
    assert synthesis_llm("big", str(toml)) == ("big", str(toml))
    assert synthesis_llm("ollama:http://h:1", str(toml)) == ("ollama:http://h:1", None)
    assert synthesis_llm(None) is None
    with pytest.raises(ConfigError, match="--llm-config"):
        llm_section("big", "m")
    with pytest.raises(ConfigError, match=r"no \[llm.small\] section \(it has: bad, big\)"):
        llm_section("small", "m", str(toml))
    with pytest.raises(ConfigError, match=r"\[llm.bad\]"):
        llm_section("bad", "m", str(toml))
    env = {"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "paper", "cwm", "--llm", "small", "--llm-config", str(toml),
         "--out", str(tmp_path / "r")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    said = " ".join(proc.stdout.split())  # rich wraps long lines
    assert proc.returncode == 2 and "no [llm.small] section" in said, proc.stdout + proc.stderr


@pytest.mark.slow
async def test_cwm_quick_report_on_the_reference_model(tmp_path: Path, smallest: None) -> None:
    """No --llm: Leduc's reference model is evaluated and plays; synthesis cells say what they need."""
    names = [
        "leduc_poker-train_transition",
        "leduc_poker-test_transition",
        "leduc_poker-test_inference",
        "leduc_poker-llm_calls",
        "leduc_poker-vs-random",
        "tic_tac_toe-vs-gt_mcts",
        "gin_rummy-vs-random",
    ]
    out = tmp_path / "cwm"
    cells = await CwmReport(_args(), out, Console(quiet=True)).run(names)
    by = {c.name: c for c in cells}
    for name in ("leduc_poker-train_transition", "leduc_poker-llm_calls"):
        assert "needs a model that writes code" in by[name].why
    assert "no hand-written reference model of gin_rummy" in by["gin_rummy-vs-random"].why
    assert by["leduc_poker-test_transition"].score == 1.0 and by["leduc_poker-test_inference"].score == 1.0
    assert by["leduc_poker-vs-random"].unit == "payoff" and by["tic_tac_toe-vs-gt_mcts"].unit == "share"
    _check_sources(out, cells)
    assert extra(out, cells)[-1].startswith("Not measured: needs a model that writes code")
    report = write_markdown(out, "cwm", cells, {}, "quick").read_text()
    assert "not measured: the reference model is hand-written" in report
    assert set(names) <= {n for t in TABLES.values() for n in t}


@pytest.mark.slow
@pytest.mark.timeout(900)
async def test_cwm_synthesis_through_a_standin_llm(tmp_path: Path, smallest: None) -> None:
    """--llm: `research.cwm` synthesizes Leduc (its trajectories through the referee, its candidate in
    the sandbox), the model is evaluated and plays the LLM-as-policy; the calls curve is plotted."""
    code = reference_code("leduc_poker")

    def answer(body: dict[str, Any]) -> str:
        return _default_answer(body) if body.get("format") else f"```python\n{code}\n```"

    standin = OllamaStandIn()
    standin.replies += [answer] * 200
    await standin.start()
    out = tmp_path / "cwm"
    names = ["leduc_poker-train_inference", "leduc_poker-llm_calls", "leduc_poker-test_transition",
             "leduc_poker-vs-llm_policy"]  # fmt: skip
    try:
        args = _args(llm=f"ollama:{standin.url}")
        cells = await CwmReport(args, out, Console(quiet=True)).run(names)
    finally:
        await standin.stop()
    by = {c.name: c for c in cells}
    assert by["leduc_poker-train_inference"].score == 1.0 and by["leduc_poker-llm_calls"].score == 1.0
    assert by["leduc_poker-test_transition"].score == 1.0
    assert by["leduc_poker-vs-llm_policy"].score is not None, by["leduc_poker-vs-llm_policy"]
    assert any(r.get("format") for r in standin.requests)  # the llm_policy opponent asked it too
    _check_sources(out, cells)
    assert calls_curves(out)["leduc_poker"]["transition_accuracy"] == [1.0]
    assert extra(out, cells)[-1] == "![accuracy against LLM calls](cwm_calls.png)"
    assert (out / "cwm_calls.png").stat().st_size > 0 and (out / "cwm_calls.svg").exists()


async def test_coaching_without_the_train_extra_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(coaching, "TRAIN_MODULES", ("json", "no_such_module_for_this_test"))
    cells = await coaching.run(_args(), tmp_path, Console(quiet=True))
    assert [c.name for c in cells] == coaching.TABLES["table1"]
    assert all(c.score is None and "pip install torch==2.13.0" in c.why for c in cells)
    assert "no_such_module_for_this_test missing" in cells[0].why


def test_coaching_cells_from_a_table1_result(tmp_path: Path) -> None:
    run = tmp_path / "table1" / "runs" / "table1-x"
    run.mkdir(parents=True)
    ratings = [
        {"agent": "coach_distilled", "elo": 1502.1, "bt": 1586.5, "bt_low": 1377.8, "bt_high": 1831.7},
        {"agent": "base", "elo": 1494.6, "bt": 1458.2, "bt_low": 1229.0, "bt_high": 1669.8},
    ]
    result = {"run": str(run), "matches": 12, "ratings": ratings}
    cells = {c.name: c for c in coaching.cells_from(result, tmp_path, coaching.TABLES["table1"])}
    assert cells["coach_distilled-elo"].score == 1502.1 and cells["coach_distilled-elo"].unit == "elo"
    assert (cells["base-bt"].low, cells["base-bt"].high) == (1229.0, 1669.8)
    assert cells["coach_distilled-elo"].run == "table1/runs/table1-x"
    assert "no rating" in cells["cfvfp_distilled-elo"].why
    numbers = paper_numbers("coaching")
    report = write_markdown(tmp_path, "coaching", list(cells.values()), numbers, "quick").read_text()
    assert "| 1549 ± 32 | 1502 of 12 matches in the run |" in report
    assert "1586 [1378, 1832]" in report  # Bradley-Terry with its interval
