"""Every puzzle is exactly mate in N: the exhaustive search (games/chess/mate_search.py) proves and
refutes short mates, and `make_puzzles.py --check` catches a puzzle with a shorter mate than its
label (which the structural check alone passed) and passes a sample of the shipped suite."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import chess
import chess.engine
import pytest

from agents.stockfish_agent import find_stockfish
from games.chess.mate_search import Unknown, mate_within, shortest_mate
from games.chess.puzzles import DEFAULT_PATH, load_puzzles
from scripts.make_puzzles import main as make_main
from scripts.make_puzzles import shorter_mate

# After 1. Rad1 b5 of the shipped puzzle m3-00001-064: mate in 2 (Rd7+ Kb6, Rh6#), none in 1.
MATE_IN_2 = "7R/2k5/8/ppp1Np2/P1B2K2/1P6/6P1/3R4 w - - 0 34"
# The shipped puzzle m4-00012-041: mate in 4, so no mate in 3 (proved below).
MATE_IN_4 = "2k4r/pRq3p1/2P4B/2bnpp2/3n2pr/P2P4/2P1BPP1/3QR1K1 b - - 0 21"
# Shipped as a mate in 7 until the check found a mate in 6 or fewer (issue 27's example).
MISLABELLED_FEN = "3N3k/8/5P1p/2PB2p1/3P1p2/8/1P3KPP/2B4R w - - 0 32"
MISLABELLED = {
    "id": "m7-00650-062",
    "depth": 7,
    "fen": MISLABELLED_FEN,
    "solution": "h2h4 g5g4 c1f4 g4g3 f2g3 h8h7 f4e5 h7g6 f6f7 g6h5 f7f8q h5g6 f8f7".split(),
}

# Shipped as a mate in 7 (m7-00677-048) until issue 43: a mate in 6 that `go mate 6` finds after
# about 2.3 million nodes (Threads 1, Hash 32, cleared), past the default check's 2,000,000.
DEEP_FEN = "3R1rrk/1p1b3p/8/p3Pp2/7Q/P1P3P1/5PBP/R5K1 w - - 3 25"
DEEP = {
    "id": "m7-00677-048",
    "depth": 7,
    "fen": DEEP_FEN,
    "solution": "d8d7 g8g7 h4h6 f8g8 h6f6 f5f4 g2d5 f4g3 d5g8 g3f2 g1f2 h8g8 f6g7".split(),
}

needs_stockfish = pytest.mark.skipif(
    find_stockfish() is None, reason="stockfish not installed (make system-deps)"
)


def test_exhaustive_search_finds_and_refutes_short_mates() -> None:
    board = chess.Board(MATE_IN_2)
    assert mate_within(board, 1) is None
    found = shortest_mate(board, 3)
    assert found is not None and found[0] == 2
    line = chess.Board(MATE_IN_2)
    for move in found[1]:
        line.push(move)
    assert line.is_checkmate() and len(found[1]) == 3
    assert board.fen() == MATE_IN_2  # the caller's board is untouched


@pytest.mark.slow
def test_exhaustive_search_proves_no_mate_in_3() -> None:
    assert shortest_mate(chess.Board(MATE_IN_4), 3) is None


def test_exhaustive_search_says_unknown_past_its_budget() -> None:
    with pytest.raises(Unknown):
        shortest_mate(chess.Board(MATE_IN_4), 3, budget=50)


@needs_stockfish
def test_shorter_mate_exhaustive_and_by_stockfish() -> None:
    path = find_stockfish()
    assert path is not None
    engine = chess.engine.SimpleEngine.popen_uci(path)
    try:
        engine.configure({"Threads": 1, "Hash": 16})
        small = shorter_mate(engine, chess.Board(MATE_IN_2), 3)
        assert (small.mate, small.how) == (2, "exhaustive")
        # Beyond the exhaustive range Stockfish's mate search answers, and says so.
        deep = shorter_mate(engine, chess.Board(MISLABELLED_FEN), 7, nodes=2_000_000, exhaustive_max=2)
        assert deep.mate is not None and deep.mate < 7 and deep.how == "stockfish 2000000 nodes"
    finally:
        engine.quit()


@needs_stockfish
def test_check_refuses_a_puzzle_with_a_shorter_mate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(MISLABELLED) + "\n")
    # The structure alone is fine: that is all the check looked at before.
    assert make_main(["--check", str(path), "--structure-only"]) == 0
    results = tmp_path / "verdicts.jsonl"
    assert make_main(["--check", str(path), "--nodes", "2000000", "--results", str(results)]) == 2
    captured = capsys.readouterr()
    assert "m7-00650-062: MATE IN" in captured.out and "m7-00650-062" in captured.err
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert row["id"] == "m7-00650-062" and row["mate"] < 7
    # A rerun takes the verdict from the results file (no search) and still refuses.
    assert make_main(["--check", str(path), "--nodes", "2000000", "--results", str(results)]) == 2
    assert len(results.read_text().splitlines()) == 1


@pytest.mark.slow
@needs_stockfish
def test_check_passes_a_sample_of_the_shipped_suite(capsys: pytest.CaptureFixture[str]) -> None:
    """The first puzzle of each depth: exhaustive proofs at depths 3 and 4, Stockfish beyond."""
    assert make_main(["--check", str(DEFAULT_PATH), "--sample", "1", "--nodes", "500000"]) == 0
    out = capsys.readouterr().out
    assert "6 of 6 exactly as labelled" in out
    assert out.count("(exhaustive") == 2


@pytest.mark.slow
@needs_stockfish
def test_relabel_makes_a_mislabelled_puzzle_what_it_is(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(MISLABELLED) + "\n")
    results, out = tmp_path / "verdicts.jsonl", tmp_path / "fixed.jsonl.gz"
    assert make_main(["--check", str(path), "--nodes", "1000000", "--results", str(results)]) == 2
    assert (
        make_main(
            ["--relabel", str(path), "--results", str(results), "--nodes", "1000000", "--out", str(out)]
        )
        == 0
    )
    (fixed,) = load_puzzles(out)
    assert (
        fixed.depth < 7
        and fixed.id == f"m{fixed.depth}-00650-062"
        and "relabelled from mate in 7" in fixed.source
    )
    # The relabelled puzzle is exact: the check finds no shorter mate.
    assert make_main(["--check", str(out), "--nodes", "1000000"]) == 0


@needs_stockfish
def test_derive_tops_up_a_depth_from_the_next(tmp_path: Path) -> None:
    """The first mate in 4 of the suite, after its first two plies, is an exact mate in 3 (proved
    exhaustively: no mate in 2), with the rest of its line as the solution."""
    (parent,) = [p for p in load_puzzles() if p.depth == 4][:1]
    path, out = tmp_path / "one.jsonl.gz", tmp_path / "more.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(parent.model_dump_json() + "\n")
    assert make_main(["--derive", str(path), "--out", str(out), "--depths", "3-3", "--per-depth", "1"]) == 0
    first, child = load_puzzles(out)
    assert first == parent and child.depth == 3 and child.solution == parent.solution[2:]
    assert child.id.startswith("m3-") and "derived from " + parent.id in child.source
    # A second run adds nothing: depth 3 has its count.
    assert make_main(["--derive", str(out), "--out", str(path), "--depths", "3-3", "--per-depth", "1"]) == 0
    assert len(load_puzzles(path)) == 2


@needs_stockfish
def test_a_slow_engine_start_is_waited_for(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """On a loaded machine Stockfish took over python-chess's default 10 s to answer `uci` and a
    generator run died at start; make_puzzles waits as long as its wall cap. A stand-in binary
    that sleeps 12 s before starting the real Stockfish plays the loaded machine."""
    slow = tmp_path / "slow-stockfish"
    slow.write_text(f"#!/bin/sh\nsleep 12\nexec {find_stockfish()}\n")
    slow.chmod(0o755)
    path = tmp_path / "one.jsonl.gz"
    first = next(p for p in load_puzzles(DEFAULT_PATH) if p.depth == 3)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(first.model_dump_json() + "\n")
    assert make_main(["--check", str(path), "--stockfish", str(slow)]) == 0
    assert "1 of 1 exactly as labelled" in capsys.readouterr().out


@needs_stockfish
def test_a_rerun_searches_again_where_the_wall_cap_cut_a_search(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An "unknown" verdict (the wall cap stopped the search on a loaded machine) proves nothing:
    a rerun with the same --results must search that puzzle again, not fail it again."""
    path = tmp_path / "one.jsonl.gz"
    first = next(p for p in load_puzzles(DEFAULT_PATH) if p.depth == 5)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(first.model_dump_json() + "\n")
    results = tmp_path / "verdicts.jsonl"
    cut = {
        "id": first.id,
        "depth": 5,
        "nodes": 200000,
        "mate": None,
        "line": [],
        "how": "unknown",
        "seconds": 120.4,
    }
    results.write_text(json.dumps(cut) + "\n")
    assert make_main(["--check", str(path), "--nodes", "200000", "--results", str(results)]) == 0
    assert "1 of 1 exactly as labelled" in capsys.readouterr().out
    assert json.loads(results.read_text().splitlines()[-1])["how"] == "stockfish 200000 nodes"


@pytest.mark.slow
@needs_stockfish
def test_the_mate_search_mode_finds_what_the_default_check_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default check's 2,000,000 nodes pass m7-00677-048 as exactly mate in 7 (none found is
    not a proof); `--mate-search` lets `go mate 6` run on and finds the mate in 6. (Its default is
    50,000,000 nodes; 3,000,000 is enough for this puzzle and keeps the test short.)"""
    path = tmp_path / "deep.jsonl.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps(DEEP) + "\n")
    assert make_main(["--check", str(path)]) == 0
    assert "m7-00677-048: no mate in 6 (stockfish 2000000 nodes" in capsys.readouterr().out
    results = tmp_path / "verdicts.jsonl"
    args = ["--check", str(path), "--mate-search", "--nodes", "3000000", "--results", str(results)]
    assert make_main(args) == 2
    assert "m7-00677-048: MATE IN 6 (stockfish mate search 3000000 nodes" in capsys.readouterr().out
    (row,) = [json.loads(line) for line in results.read_text().splitlines()]
    assert row["mate"] == 6 and row["how"] == "stockfish mate search 3000000 nodes"
    assert all(p.fen != DEEP_FEN or p.depth != 7 for p in load_puzzles())  # no longer a mate in 7
