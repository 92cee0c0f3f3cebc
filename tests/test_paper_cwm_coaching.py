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
import asyncio
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from agents.cwm.reference import reference_code
from agents.cwm.sandbox import SandboxUnavailable
from bus.protocol import GameSpec, MatchRecord, MoveRecord, Provenance, Usage
from referee.config import ConfigError, RatingsConfig
from referee.ratings import elo
from research.coach.table1 import elo_intervals
from research.cwm import cli as cwm_cli
from research.cwm.model_files import write_reference_dir
from research.cwm.synthesize import Outcome, Task
from research.cwm.synthesize import report as synthesis_report
from research.cwm.trajectories import held_out_games
from research.papers import coaching, cwm_paper
from research.papers.cells import Cell, read_cells, write_cells
from research.papers.cwm_models import NO_CODE, Models
from research.papers.cwm_paper import TABLES, CwmReport, Sizes, calls_curves, extra
from research.papers.llm_spec import llm_section, synthesis_llm
from research.papers.numbers import paper_numbers
from research.papers.report import write_markdown
from tests.llm_standins import OllamaStandIn, _default_answer

REPO = Path(__file__).resolve().parents[1]


def _args(**kw: Any) -> argparse.Namespace:
    base = {
        "table": None,
        "llm": None,
        "llm_config": None,
        "model": "smollm2",
        "scale": "quick",
        "cells": None,
    }
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
    assert by["leduc_poker-test_transition"].title.endswith("(hand-written reference model, not synthesized)")
    assert {s.agent for s in by["leduc_poker-vs-random"].seats} == {"cwm", "random"}
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


def test_cwm_and_coaching_honour_cells(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--cells A,B` keeps only the named cells (before, `paper cwm` and `paper coaching` ran all)."""

    def no_sandbox() -> None:
        raise SandboxUnavailable("no sandbox in this test")

    monkeypatch.setattr(cwm_paper, "check_available", no_sandbox)
    wanted = "leduc_poker-test_transition,tic_tac_toe-vs-random"
    (tmp_path / "cwm").mkdir()
    (tmp_path / "coach").mkdir()
    cells = asyncio.run(CwmReport(_args(cells=wanted), tmp_path / "cwm", Console(quiet=True)).run())
    assert [c.name for c in cells] == wanted.split(",")
    monkeypatch.setattr(coaching, "TRAIN_MODULES", ("no_such_module_for_this_test",))
    cells = asyncio.run(coaching.run(_args(cells="base-elo"), tmp_path / "coach", Console(quiet=True)))
    assert [c.name for c in cells] == ["base-elo"]
    with pytest.raises(ConfigError, match="not cells of"):
        asyncio.run(coaching.run(_args(cells="nope"), tmp_path / "coach", Console(quiet=True)))


def test_table1_says_which_rows_are_hand_written_reference_models() -> None:
    report = CwmReport(_args(), Path("unused"), Console(quiet=True))
    assert report._title("leduc_poker-test_transition", reference=True).endswith(
        "(hand-written reference model, not synthesized)"
    )
    assert "reference" not in report._title("leduc_poker-test_transition")


def test_a_synthesis_that_wrote_no_code_scores_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """0 of 41 train tests passed is accuracy 0, not "n/a"; `cwm eval` scores such a folder 0 on the
    held-out tests instead of exiting 2; the paper report counts it as a model with accuracy 0."""
    task = Task(game="tic_tac_toe", rules="", imperfect=False, closed_deck=False,
                tests=[{"kind": "transition"}] * 41)  # fmt: skip
    rep = synthesis_report(task, Outcome(code=None, run=None, llm_calls=3), {})
    assert rep["train_transition_accuracy"] == 0.0 and rep["train_inference_accuracy"] is None
    assert rep["train_tests_passed"] == 0 and rep["train_tests"] == 41
    folder = tmp_path / "models" / "tic_tac_toe" / "synth-0"
    write_reference_dir(folder, "tic_tac_toe")
    (folder / "model.py").unlink()
    # A report.json written before the fix: None, not 0.
    (folder / "report.json").write_text(
        json.dumps(
            {"train_transition_accuracy": None, "train_tests": 41, "train_tests_passed": 0, "llm_calls": 3}
        )
    )
    code = cwm_cli.main(["eval", str(folder), "--games", "2", "--transitions", "10", "--json"])
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert code == 0 and row["test_transition_accuracy"] == 0.0 and row["test_transitions"] > 0
    assert row["failure"].startswith("no_code")
    report = CwmReport(_args(), tmp_path, Console(quiet=True))
    no_code = f"models/tic_tac_toe/synth-0{NO_CODE}"
    assert asyncio.run(report._metric(no_code, "train_transition")) == (0.0, 41)
    assert Models([no_code], False).playable == []


def test_held_out_mcts_share_is_the_share_mcts_played() -> None:
    """OpenSpiel's C++ MCTS cannot drive our Python games: their held-out players are all random, and
    eval.json said `test_mcts_share: 0.5` for them."""
    _, share = held_out_games("quadranto", 2, 0, 0.5)
    assert share == 0.0
    _, share = held_out_games("tic_tac_toe", 6, 0, 0.5, simulations=5)
    assert 0.0 < share < 1.0


def test_coaching_paper_scale_has_the_papers_sizes_and_can_show_its_spread() -> None:
    """128 prompts (CFVFP nodes) a step for 50 steps, 6,400 nodes; and enough matches that the paper's
    Elo (K = 0.2) can show its spread. With 10 matches per pairing and seat order (60 per agent) an
    Elo moves 12 points at most; with the paper scale's count, agents of the paper's strengths
    (coach 1549, CFVFP 1470) are rated by referee.ratings within the paper's +-32 of them."""
    steps, prompts, group, per_order = coaching.SIZES["paper"]
    assert (steps, prompts, steps * prompts, group) == (50, 128, 6400, 4)
    true = {"coach_distilled": 1549.0, "cfvfp_distilled": 1470.0, "base": 1490.0, "cfvfp_table": 1491.0}
    cfg = RatingsConfig.model_validate({"elo_k": "llm_coaching"})
    game = GameSpec(name="tic_tac_toe")

    def rated(per: int) -> dict[str, float]:
        rng = random.Random(3)
        records: list[MatchRecord] = []
        names = list(true)
        for i, a in enumerate(names):
            for b in names[i + 1 :]:
                for x, y in ((a, b), (b, a)):
                    for _ in range(per):
                        p = 1 / (1 + 10 ** (-(true[x] - true[y]) / 400))
                        win = rng.random() < p
                        records.append(
                            MatchRecord(
                                match_id=f"t-{len(records):06d}", tournament="t", game=game, seats=[x, y],
                                seed=0, returns=[1.0, -1.0] if win else [-1.0, 1.0], outcome="decisive",
                                ranks=[1, 2] if win else [2, 1],
                            )
                        )  # fmt: skip
        return elo(records, cfg, names)

    small = rated(10)
    assert all(abs(r - 1500) <= 12 for r in small.values())
    paper = rated(per_order)
    assert abs(paper["coach_distilled"] - 1549) <= 32 and abs(paper["cfvfp_distilled"] - 1470) <= 31


def test_coaching_elo_cells_carry_their_interval(tmp_path: Path) -> None:
    run = tmp_path / "table1" / "runs" / "table1-x"
    run.mkdir(parents=True)
    ratings = [{"agent": "base", "elo": 1500.4, "elo_low": 1499.0, "elo_high": 1501.9, "bt": 1.0,
                "bt_low": 0.0, "bt_high": 2.0}]  # fmt: skip
    cells = coaching.cells_from({"run": str(run), "matches": 12, "ratings": ratings}, tmp_path, ["base-elo"])
    assert (cells[0].low, cells[0].high) == (1499.0, 1501.9)
    report = write_markdown(tmp_path, "coaching", cells, {}, "quick").read_text()
    assert "1500 [1499, 1502] of 12 matches" in report
    records = [
        MatchRecord(match_id=f"t-{i}", tournament="t", game=GameSpec(name="tic_tac_toe"), seats=["a", "b"],
                    seed=0, returns=[1.0, -1.0], outcome="decisive", ranks=[1, 2])
        for i in range(20)
    ]  # fmt: skip
    low, high = elo_intervals(records, ["a", "b"], rounds=50)["a"]
    assert 1500 < low <= high  # a won every match: its whole interval is above the start


def test_cwm_resume_without_a_sandbox_keeps_finished_cells(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--resume` on a machine without the sandbox wrote cells.json anew with only "no sandbox"
    cells: the finished cells of the earlier run were lost from it (and from report.md)."""

    def no_sandbox() -> None:
        raise SandboxUnavailable("no sandbox in this test")

    monkeypatch.setattr(cwm_paper, "check_available", no_sandbox)
    done = Cell(name="tic_tac_toe-vs-random", title="t", score=0.75, games=4, run="runs/x")
    other = Cell(name="connect_four-vs-random", title="c", why="the run failed")
    write_cells(tmp_path, {done.name: done, other.name: other})
    wanted = f"{done.name},{other.name}"
    cells = asyncio.run(CwmReport(_args(cells=wanted, resume=True), tmp_path, Console(quiet=True)).run())
    assert cells[0] == done and "no sandbox" in cells[1].why
    assert read_cells(tmp_path)[done.name] == done


def test_coaching_cells_name_the_model_that_played(tmp_path: Path) -> None:
    """Each Table 1 row names the model its agent played on (the records' provenance), as every other
    paper's cells do; before, the row said only "Coach-distilled policy LLM"."""
    run = tmp_path / "table1" / "runs" / "table1-x"
    run.mkdir(parents=True)
    prov = [
        Provenance(agent="coach_distilled", models=["openai:coach-smollm2"]),
        Provenance(agent="cfvfp_table", models=["openai:smollm2"]),  # configured, never asked
    ]
    asked = MoveRecord(
        turn=0, player=0, action=0, text="a", agent="coach_distilled", usage=Usage(llm_calls=1)
    )
    table = MoveRecord(turn=1, player=1, action=0, text="a", agent="cfvfp_table")
    rec = MatchRecord(
        match_id="t-1", tournament="t", game=GameSpec(name="kuhn_poker"),
        seats=["coach_distilled", "cfvfp_table"], seed=0, returns=[1.0, -1.0], outcome="decisive",
        ranks=[1, 2], provenance=prov, moves=[asked, table],
    )  # fmt: skip
    (run / "matches.jsonl").write_text(rec.model_dump_json() + "\n")
    ratings = [
        {"agent": a, "elo": 1500.2, "bt": 1.0, "bt_low": 0.0, "bt_high": 2.0}
        for a in ("coach_distilled", "cfvfp_table")
    ]
    [cell] = coaching.cells_from(
        {"run": str(run), "matches": 1, "ratings": ratings}, tmp_path, ["coach_distilled-elo"]
    )
    assert cell.title == "Coach-distilled policy LLM: Elo (coach_distilled on openai:coach-smollm2)"
    [table_cell] = coaching.cells_from(
        {"run": str(run), "matches": 1, "ratings": ratings}, tmp_path, ["cfvfp_table-elo"]
    )
    assert table_cell.title == "cfvfp_table: Elo" and table_cell.seats[0].models == []
