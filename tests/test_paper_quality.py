"""`spielbus paper` cells gain the agents' move quality once their run folder is analysed: the
figures are `analysis.summary`'s for the rows in the run's analysis.jsonl, and the report's cell
text shows the agent's."""

from __future__ import annotations

from pathlib import Path

from analysis.match import Judges, analyse_match
from analysis.summary import agent_quality
from bus.protocol import GameSpec
from research.papers.cells import Cell, read_cells, with_quality, write_cells
from research.papers.report import ours_text
from tests.test_analysis_games import random_record


def test_a_cell_gains_the_figures_of_its_analysed_run(tmp_path: Path) -> None:
    run = tmp_path / "runs" / "c1" / "run-1"
    run.mkdir(parents=True)
    records = [random_record(GameSpec(name="tic_tac_toe"), 9, seed=s) for s in range(4)]
    rows = [row for rec in records for row in analyse_match(rec, Judges())]
    cell = Cell(
        name="c1",
        title="t",
        agent="a",
        opponent="b",
        score=0.5,
        low=0.1,
        high=0.9,
        games=4,
        run="runs/c1/run-1",
    )

    assert with_quality(tmp_path, cell).quality == []  # not analysed yet: nothing claimed
    assert "accuracy" not in ours_text(cell)

    (run / "analysis.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in rows))
    got = with_quality(tmp_path, cell)
    assert got.quality == agent_quality(rows)
    mine = next(q for q in got.quality if q.agent == "a")
    assert f"accuracy {mine.accuracy.value:.1f}%" in ours_text(got)
    # cells.json keeps them (the strict model reads its own output back).
    write_cells(tmp_path, {"c1": got})
    assert read_cells(tmp_path)["c1"].quality == got.quality
