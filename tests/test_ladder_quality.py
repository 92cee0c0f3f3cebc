"""The ladder's move-quality columns from given analyst rows (spielbus/ladder_quality.py onto
referee/ladder/board.py): only the ladder's own matches count, each row is credited to the ladder
entry that played it and to the result's game label, the figures are the analysis summary's
(worked out by hand here), and the analyst's file is re-read when it grows, a torn last match left
out."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.scale import MoveAnalysis, Reference
from referee.ladder.board import board, with_quality
from referee.ladder.store import LadderResult
from spielbus.ladder_quality import QualityFile, ladder_quality

REF = Reference(name="exact", detail="minimax", exact=True, unit="return", limits="none")


def move(
    match: str, agent: str, seat: int, i: int, wc_loss: float, game: str = "tic_tac_toe"
) -> MoveAnalysis:
    acc = 100.0 - 100.0 * wc_loss  # any accuracy will do: the summary averages what it is given
    cls = "blunder" if wc_loss >= 0.3 else "best"
    return MoveAnalysis(
        match_id=match,
        game=game,
        index=i,
        turn=i,
        seat=seat,
        agent=agent,
        action=0,
        text="a",
        value_before=0.0,
        value_played=-wc_loss,
        value_best=0.0,
        best_action=0,
        best_text="a",
        loss=wc_loss,
        wc_loss=wc_loss,
        accuracy=acc,
        cls=cls,
        reference=REF,
        analysis_ms=0.1,
    )


RESULTS = [
    LadderResult(match_id="m1", first="a@p1", second="b@p2", score=0.5, game="tic_tac_toe"),
    LadderResult(match_id="m2", first="b@p2", second="a@p1", score=1.0, game="tic_tac_toe"),
]
ROWS = [
    # m1: a plays two perfect moves, b one.
    move("m1", "a", 0, 0, 0.0),
    move("m1", "b", 1, 1, 0.0),
    move("m1", "a", 0, 2, 0.0),
    # m2: a one perfect move and one blunder (a loss of 0.5), b two perfect moves.
    move("m2", "b", 0, 0, 0.0),
    move("m2", "a", 1, 1, 0.0),
    move("m2", "b", 0, 2, 0.0),
    move("m2", "a", 1, 3, 0.5),
    # Another tournament's match on the same bus, by an agent of the same name: not the ladder's.
    move("other", "a", 0, 0, 1.0),
    move("other", "a", 0, 1, 1.0),
]


def test_board_rows_carry_each_entrys_move_quality_from_the_ladders_matches() -> None:
    figures = ladder_quality(RESULTS, ROWS)
    assert set(figures) == {("tic_tac_toe", "a@p1"), ("tic_tac_toe", "b@p2")}
    rows = {r.entry: r for r in with_quality(board(RESULTS), figures)}
    a, b = rows["a@p1"].quality, rows["b@p2"].quality
    assert a is not None and b is not None
    # a: 4 moves in 2 matches, one blunder of 0.5: the "other" match's two blunders left out.
    assert (a.moves, a.matches, a.reference) == (4, 2, "exact")
    assert a.accuracy == pytest.approx(87.5)
    assert a.mean_loss == pytest.approx(0.125)
    assert a.blunders == pytest.approx(25.0)
    # Bootstrap over the two matches: m1 alone (no blunder) to m2 alone (one in two moves).
    assert a.blunders_low == pytest.approx(0.0) and a.blunders_high == pytest.approx(50.0)
    assert a.accuracy_low < a.accuracy < a.accuracy_high and a.mean_loss_low < a.mean_loss_high
    assert (b.moves, b.accuracy, b.blunders, b.blunders_low, b.blunders_high) == (3, 100.0, 0.0, 0.0, 0.0)
    # The rating columns are the board's own, untouched.
    assert [r.model_dump(exclude={"quality"}) for r in with_quality(board(RESULTS), figures)] == [
        r.model_dump(exclude={"quality"}) for r in board(RESULTS)
    ]


def test_an_entry_without_scored_moves_has_no_quality_and_game_labels_come_from_the_ladder() -> None:
    go = LadderResult(match_id="g1", first="a@p1", second="c@p3", score=1.0, game="go(board_size=7)")
    figures = ladder_quality([*RESULTS, go], [*ROWS, move("g1", "a", 0, 0, 0.0, game="go")])
    assert ("go(board_size=7)", "a@p1") in figures  # the analyst writes the game's name only
    rows = with_quality(board([*RESULTS, go]), figures)
    assert next(r for r in rows if r.entry == "c@p3").quality is None


def test_the_analysts_file_is_read_again_when_it_grows(tmp_path: Path) -> None:
    qf = QualityFile(tmp_path)  # the analyst's --out folder
    assert qf.refresh(RESULTS) and qf.figures == {}  # nothing scored yet
    assert not qf.refresh(RESULTS)
    lines = [r.model_dump_json() + "\n" for r in ROWS[:3]]
    (tmp_path / "analysis.jsonl").write_text("".join(lines))
    assert qf.refresh(RESULTS)
    assert qf.figures[("tic_tac_toe", "a@p1")].moves == 2
    # The analyst mid-write: m2's first line whole, its second torn. m2 is left out until whole.
    with (tmp_path / "analysis.jsonl").open("a") as fh:
        fh.write(ROWS[3].model_dump_json() + "\n" + ROWS[4].model_dump_json()[:20])
    assert qf.refresh(RESULTS)
    assert qf.figures[("tic_tac_toe", "a@p1")].moves == 2
    (tmp_path / "analysis.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in ROWS))
    assert qf.refresh(RESULTS)
    assert qf.figures[("tic_tac_toe", "a@p1")].moves == 4
