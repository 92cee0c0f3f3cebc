"""The mate-in-N suite: the shipped file is valid, a bad line is refused naming it (loader and
generator), agent specs parse, and `spielbus puzzles` scores real matches through the referee."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from rich.console import Console

from agents.stockfish_agent import find_stockfish
from games.chess.puzzles import DEPTHS, PuzzleError, load_puzzles, select
from scripts.make_puzzles import main as make_main
from spielbus.puzzles import main as puzzles_main
from spielbus.puzzles import match_fen, parse_agent_spec, table2

MATE1 = {"id": "ok", "depth": 1, "fen": "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1", "solution": ["d1d8"]}


def _write(tmp_path: Path, *lines: dict[str, object]) -> Path:
    path = tmp_path / "p.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for line in lines:
            fh.write(json.dumps(line) + "\n")
    return path


def test_shipped_suite_is_valid() -> None:
    puzzles = load_puzzles()
    for d in DEPTHS:
        assert any(p.depth == d for p in puzzles), f"no mate in {d}"
    assert len({p.fen for p in puzzles}) == len(puzzles)


@pytest.mark.parametrize(
    ("bad", "words"),
    [
        ({**MATE1, "fen": "6k1/5ppp/8/8/8/8/5PPP/3RK1K1 w - - 0 1"}, "illegal position"),
        ({**MATE1, "fen": "not a fen"}, "not a FEN"),
        ({**MATE1, "solution": ["d1d7"]}, "does not end in checkmate"),
        ({**MATE1, "solution": ["d1d9"]}, "not a UCI move"),
        ({**MATE1, "solution": ["e1e2"]}, "illegal"),
        ({**MATE1, "depth": 2}, "needs 3 plies"),
        ({**MATE1, "depth": 2, "solution": ["d1d2", "h7h6", "d2d8"]}, "mates at once"),
        ({**MATE1, "depth": "1"}, "depth"),
    ],
)
def test_bad_line_is_refused_naming_it(tmp_path: Path, bad: dict[str, object], words: str) -> None:
    path = _write(tmp_path, MATE1 | {"id": "first"}, bad)
    with pytest.raises(PuzzleError) as err:
        load_puzzles(path)
    assert f"{path}:2:" in str(err.value) and words in str(err.value)


def test_generator_check_refuses_bad_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, {**MATE1, "solution": ["d1d7"]})
    assert make_main(["--check", str(path), "--structure-only"]) == 2
    assert f"{path}:1:" in capsys.readouterr().err
    assert make_main(["--check", str(_write(tmp_path, MATE1)), "--structure-only"]) == 0


def test_agent_specs_and_mirroring() -> None:
    a = parse_agent_spec("mcts:simulations=50,uct_c=1.5")
    assert (a.label, a.kind, a.options) == ("mcts-50-15", "mcts", {"simulations": 50, "uct_c": 1.5})
    b = parse_agent_spec('vote=llm_policy:mode="vote"')
    assert (b.label, b.options) == ("vote", {"mode": "vote"})
    for bad in ("mcts:simulations", "defender=mcts", "x y", "a.b=mcts"):
        with pytest.raises(ValueError):
            parse_agent_spec(bad)
    white = select(load_puzzles(), [3], None)
    p = next(p for p in white if p.attacker_white)
    assert match_fen(p).split()[1] == "b"


def test_table_counts_unplayed_puzzles_apart() -> None:
    """A run cut short (`--deadline`) leaves puzzles without a record: shown as not played, not failed."""
    three = select(load_puzzles(), [3], 3)
    results = {"a": {three[0].id: True, three[1].id: False}}
    console = Console(width=200, record=True)
    console.print(table2(results, three, ["a", "b"]))
    row = next(line for line in console.export_text().splitlines() if line.strip(" │┃").startswith("3 "))
    assert "50% (1/2), 1 not played" in row
    assert "- (0/0), 3 not played" in row


@pytest.mark.slow
@pytest.mark.skipif(find_stockfish() is None, reason="stockfish not installed")
def test_puzzles_command_scores_real_matches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = puzzles_main(
        ["sf=stockfish:movetime_ms=300", "first", "--depth", "3", "--count", "2", "--run-dir", str(tmp_path)]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "100% (2/2)" in out
    (verdicts,) = tmp_path.glob("puzzles-*/puzzles.json")
    results = json.loads(verdicts.read_text())
    assert list(results["sf"].values()) == [True, True]
    assert len(results["first"]) == 2
    assert len((verdicts.parent / "matches.jsonl").read_text().splitlines()) == 4
