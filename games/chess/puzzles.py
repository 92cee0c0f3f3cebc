"""The shipped mate-in-N puzzle suite (games/data/mate_in_n.jsonl.gz) and its checks.

One JSON object per line:

    {"id": "m3-0007", "depth": 3, "fen": "...", "solution": ["e2e4", ...], "source": "..."}

`depth` N is the number of the attacker's moves (the side to move in `fen`) to
mate; `solution` is one mating line of 2N-1 plies in UCI (attacker, defender,
..., the mating move). `load_puzzles` refuses the whole file at the first bad
line, naming it: not JSON, a missing or mistyped field, an illegal FEN, an
illegal move in the solution, a solution that does not end in checkmate at its
last ply, or one of the wrong length. It also refuses a puzzle with a mate in
one when N > 1 (the cheap part of "no shorter mate"; scripts/make_puzzles.py
checks the rest with Stockfish when it makes the file).

Limits: a solution is one line, not the whole proof tree (the defender may
choose other replies; the generator's engine search is what shows the mate is
forced). Nothing here needs Stockfish or pyspiel.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable
from pathlib import Path

import chess
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from games.chess.position import BadFen, check_fen

DEFAULT_PATH = Path(__file__).resolve().parent.parent / "data" / "mate_in_n.jsonl.gz"
DEPTHS = range(3, 9)


class PuzzleError(ValueError):
    """A bad puzzle line; the message starts with `file:line:`."""


class Puzzle(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)
    id: str = Field(min_length=1, max_length=64)
    depth: int = Field(ge=1, le=20)
    fen: str
    solution: list[str] = Field(min_length=1)
    source: str = ""

    @property
    def attacker_white(self) -> bool:
        return chess.Board(self.fen).turn == chess.WHITE


def check_puzzle(p: Puzzle) -> None:
    """Raise ValueError saying what is wrong with one puzzle."""
    try:
        board = check_fen(p.fen)
    except BadFen as exc:
        raise ValueError(str(exc)) from None
    if board.is_game_over():
        raise ValueError("the position is already over")
    if len(p.solution) != 2 * p.depth - 1:
        raise ValueError(
            f"a mate in {p.depth} needs {2 * p.depth - 1} plies, the solution has {len(p.solution)}"
        )
    if p.depth > 1:
        for move in board.legal_moves:
            board.push(move)
            mate = board.is_checkmate()
            board.pop()
            if mate:
                raise ValueError(f"{move.uci()} mates at once: not a mate in {p.depth}")
    for ply, uci in enumerate(p.solution, 1):
        try:
            move = chess.Move.from_uci(uci)
        except (ValueError, chess.InvalidMoveError):
            raise ValueError(f"solution ply {ply}: {uci!r} is not a UCI move") from None
        if not board.is_legal(move):
            raise ValueError(f"solution ply {ply}: {uci} is illegal in {board.fen()}")
        board.push(move)
        if board.is_game_over() and ply != len(p.solution):
            raise ValueError(f"solution ply {ply}: the game ends before the solution does")
    if not board.is_checkmate():
        raise ValueError("the solution does not end in checkmate")


def parse_lines(lines: Iterable[str], source: str) -> list[Puzzle]:
    out: list[Puzzle] = []
    seen: set[str] = set()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{lineno}"
        try:
            puzzle = Puzzle.model_validate_json(line)
        except ValidationError as exc:
            first = exc.errors()[0]
            loc = ".".join(str(x) for x in first.get("loc", ())) or "(line)"
            raise PuzzleError(f"{where}: {loc}: {first.get('msg', 'invalid')}") from None
        try:
            check_puzzle(puzzle)
        except ValueError as exc:
            raise PuzzleError(f"{where}: puzzle {puzzle.id}: {exc}") from None
        if puzzle.id in seen:
            raise PuzzleError(f"{where}: duplicate puzzle id {puzzle.id!r}")
        seen.add(puzzle.id)
        out.append(puzzle)
    return out


def load_puzzles(path: str | Path | None = None) -> list[Puzzle]:
    p = Path(path) if path else DEFAULT_PATH
    opener = gzip.open if p.suffix == ".gz" else open
    try:
        with opener(p, "rt", encoding="utf-8") as fh:
            return parse_lines(fh, str(p))
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise PuzzleError(f"{p}: cannot read: {exc}") from exc


def select(puzzles: list[Puzzle], depths: Iterable[int], count: int | None) -> list[Puzzle]:
    """The first `count` puzzles of each depth (file order), depths in the order asked."""
    out: list[Puzzle] = []
    for d in depths:
        of_depth = [p for p in puzzles if p.depth == d]
        out.extend(of_depth if count is None else of_depth[:count])
    return out
