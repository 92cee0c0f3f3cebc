"""Chess moves of a real match (two random agents through the referee and the bus) scored by
`spielbus analyse --jobs 2`, then recomputed in the test straight from python-chess and Stockfish: the board
rebuilt from the record's move texts (SAN), each position searched at the same node count, the
centipawn loss, Lichess's Win% and accuracy formulas (lichess.org/page/accuracy) written out here."""

from __future__ import annotations

import contextlib
import math
import subprocess
import sys
from pathlib import Path

import chess
import chess.engine
import pytest

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from analysis.chess_engine import find_stockfish
from analysis.scale import MoveAnalysis
from analysis.verdict import NoReference
from tests.helpers import play, serving, spec

NODES = 3000


def _stockfish() -> str | None:
    try:
        return find_stockfish()
    except NoReference:
        return None


pytestmark = pytest.mark.skipif(_stockfish() is None, reason="stockfish not installed (make system-deps)")


def cp_for(score: chess.engine.PovScore, color: chess.Color) -> int:
    pov = score.pov(color).score(mate_score=100_000)
    assert pov is not None
    return max(-1000, min(1000, pov))


def win_percent(cp: float) -> float:
    return 50 + 50 * (2 / (1 + math.exp(-0.00368208 * cp)) - 1)


async def test_chess_losses_recomputed_with_python_chess_and_stockfish(nc, tmp_path: Path) -> None:
    # Fixed names: the seeded random agents' choices depend on the seats' names, and with fresh ids
    # each run played another game, which once had no blunder for the last assertion.
    names = ["analysis-chess-r0", "analysis-chess-r1"]
    async with contextlib.AsyncExitStack() as stack:
        for i, name in enumerate(names):
            await stack.enter_async_context(serving(nc, RandomStrategy(StrategyOptions(seed=i)), name))
        rec = await play(nc, spec("chess", names, seed=3, max_turns=16))
    assert len(rec.moves) == 16 and not rec.faults
    run = tmp_path / "run"
    run.mkdir()
    (run / "matches.jsonl").write_text(rec.model_dump_json() + "\n")

    # Two worker processes, each with its own engine, in a child process: before each worker closed
    # its engine after its match, the pool's workers could not exit and the command never returned
    # (the timeout is a hang guard, not a speed check).
    done = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "analyse", str(run), "--nodes", str(NODES), "--jobs", "2"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows = [MoveAnalysis.model_validate_json(x) for x in (run / "analysis.jsonl").read_text().splitlines()]
    assert [r.text for r in rows] == [m.text for m in rec.moves]

    path = _stockfish()
    assert path is not None  # the test is skipped without Stockfish
    engine = chess.engine.SimpleEngine.popen_uci(path)
    try:
        engine.configure({"Threads": 1, "Hash": 16})
        board = chess.Board()
        for row, step in zip(rows, rec.moves, strict=True):
            move = board.parse_san(step.text)
            best = engine.analyse(board, chess.engine.Limit(nodes=NODES), game=object())
            best_cp = cp_for(best["score"], board.turn)
            if best["pv"][0] == move:
                played_cp = best_cp
            else:
                only = engine.analyse(
                    board, chess.engine.Limit(nodes=NODES), root_moves=[move], game=object()
                )
                played_cp = cp_for(only["score"], board.turn)
            best_cp = max(best_cp, played_cp)
            assert row.agent == names[1 if board.turn == chess.WHITE else 0]  # OpenSpiel: seat 0 is black
            assert (row.value_best, row.value_played, row.cp_loss) == (
                best_cp,
                played_cp,
                best_cp - played_cp,
            )
            drop = win_percent(best_cp) - win_percent(played_cp)
            assert row.wc_loss == pytest.approx(drop / 50)
            want = 100.0 if drop <= 0 else min(100.0, max(0.0, 103.1668 * math.exp(-0.04354 * drop) - 3.1669))
            assert row.accuracy == pytest.approx(want)
            if played_cp < best_cp:
                assert row.best_text == board.san(best["pv"][0])
            assert row.reference.name == "stockfish" and not row.reference.exact
            board.push(move)
    finally:
        engine.quit()
    # Random play: some moves are blunders by Lichess's thresholds (a drop of 15 Win% points or more).
    assert any(r.cls == "blunder" for r in rows)
