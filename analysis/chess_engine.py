"""Chess moves judged by Stockfish at a fixed node count, through python-chess's UCI client.

For the position before a move the engine searches `nodes` nodes: its best move and score are the
position's value and the best move's value. The move played, when it is not the engine's best, is
searched with the same node count from the same position restricted to that move (UCI
`searchmoves`), so both values come from equal searches of one root. Scores are from the mover's
side, in centipawns capped at +-1000 with a mate counted as the cap (as Lichess does); the loss is
the centipawn loss, and the winning-chances loss and accuracy follow Lichess's formulas
(`analysis.scale`). Before every search the engine gets `ucinewgame` (its hash is cleared) and it
runs one thread, so a search gives the same answer every time (the test recomputes it).

Limits: a fixed-node search is an estimate (`exact = false`), weaker than Lichess's server analysis
at low node counts; the restricted search may score the played move above the best one (search
noise): the best value is then the played one and the loss 0. Needs Debian's `stockfish`
(`/usr/games/stockfish`) or `--stockfish PATH`.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import chess
import chess.engine
import pyspiel

from analysis.scale import CP_CAP, Reference, winning_chances_cp
from analysis.verdict import NoReference, Verdict
from games.chess.position import start_fen
from games.chess.uci import action_to_move, board_from_history, move_to_action

DEFAULT_NODES = 20_000
DEBIAN_STOCKFISH = "/usr/games/stockfish"


def find_stockfish(path: str | None = None) -> str:
    """The Stockfish binary: `path`, else `stockfish` on PATH, else Debian's; NoReference if none."""
    for candidate in (path, shutil.which("stockfish"), DEBIAN_STOCKFISH):
        if candidate and Path(candidate).is_file():
            return candidate
    raise NoReference(f"no Stockfish binary ({path or 'stockfish on PATH'} or {DEBIAN_STOCKFISH})")


def centipawns(score: chess.engine.PovScore, color: chess.Color) -> int:
    """The score for `color` in centipawns, capped at +-1000; a mate is the cap."""
    pov = score.pov(color)
    mate = pov.mate()
    if mate is not None:
        return CP_CAP if mate > 0 else -CP_CAP  # mate 0: the side to move is mated
    cp = pov.score()
    assert cp is not None
    return max(-CP_CAP, min(CP_CAP, cp))


def search(
    engine: chess.engine.SimpleEngine, board: chess.Board, nodes: int, only: chess.Move | None = None
) -> tuple[int, chess.Move | None]:
    """One search from a cleared hash: (centipawns for the side to move, best move)."""
    info = engine.analyse(
        board,
        chess.engine.Limit(nodes=nodes),
        root_moves=[only] if only is not None else None,
        game=object(),  # a new game key: python-chess sends `ucinewgame` first
    )
    pv = info.get("pv")
    return centipawns(info["score"], board.turn), pv[0] if pv else None


def open_engine(path: str) -> chess.engine.SimpleEngine:
    engine = chess.engine.SimpleEngine.popen_uci(path)
    engine.configure({"Threads": 1, "Hash": 16})
    return engine


class StockfishJudge:
    def __init__(self, nodes: int = DEFAULT_NODES, path: str | None = None) -> None:
        self.nodes = nodes
        self.engine = open_engine(find_stockfish(path))
        name = self.engine.id.get("name", "Stockfish")
        self.reference = Reference(
            name="stockfish",
            detail=f"{name}, {nodes} nodes per search, 1 thread, hash cleared per search",
            exact=False,
            unit="cp",
            limits="a fixed-node engine estimate; centipawns capped at +-1000, mate counted as the cap",
        )

    def close(self) -> None:
        self.engine.quit()

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        board = board_from_history(start_fen(game), history)
        played = action_to_move(board, action)
        best_cp, best_move = search(self.engine, board, self.nodes)
        if best_move is None or best_move == played:
            played_cp = best_cp
        else:
            played_cp, _ = search(self.engine, board, self.nodes, only=played)
        best_cp = max(best_cp, played_cp)
        best_action = (
            action if best_move is None or played_cp == best_cp else move_to_action(board, best_move)
        )
        return Verdict(
            value_before=best_cp,
            value_played=played_cp,
            value_best=best_cp,
            best_action=best_action,
            wc_played=winning_chances_cp(played_cp),
            wc_best=winning_chances_cp(best_cp),
            cp_loss=best_cp - played_cp,
        )
