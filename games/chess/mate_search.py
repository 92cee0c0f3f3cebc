"""Exhaustive forced-mate search: does the side to move have a mate in at most K moves?

`mate_within(board, k)` answers by trying every move of the attacker and every reply of the
defender (an AND/OR tree, with a table of positions already decided), so a "no" is a proof,
not an engine's opinion. Only the last attacker move is narrowed, to the moves that give check
(a mate must). Game-ending draws other than stalemate (fifty moves, repetition, insufficient
material) are ignored: a puzzle is played from its FEN and a forced mate is a mate.

Limits: pure Python (python-chess), so it is for small K: a mate in 2 is decided in well under
a second, a mate in 3 in seconds to a minute; beyond that the tree is out of reach. `budget`
caps the positions visited; when it runs out the answer is `Unknown`, never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import chess


class Unknown(Exception):
    """The node budget ran out before the search decided."""


@dataclass
class _Search:
    budget: int
    visited: int = 0
    # (position key, k) -> a mating line of the attacker (moves, alternating) or None.
    table: dict[tuple[object, int], list[chess.Move] | None] = field(default_factory=dict)

    def tick(self) -> None:
        self.visited += 1
        if self.visited > self.budget:
            raise Unknown(f"more than {self.budget} positions")

    def mate_in_one(self, board: chess.Board) -> list[chess.Move] | None:
        for move in board.legal_moves:
            if not board.gives_check(move):
                continue
            self.tick()
            board.push(move)
            mate = board.is_checkmate()
            board.pop()
            if mate:
                return [move]
        return None

    def attack(self, board: chess.Board, k: int) -> list[chess.Move] | None:
        """A line that mates within k attacker moves against every defence, or None."""
        if k == 1:
            return self.mate_in_one(board)
        key = (board._transposition_key(), k)
        if key in self.table:
            return self.table[key]
        found: list[chess.Move] | None = None
        # Shorter mates first: a mate in k-1 is also a mate within k.
        quick = self.attack(board, k - 1)
        if quick is not None:
            found = quick
        else:
            # Checks first: they are the likely mating tries, and they end the search early.
            moves = sorted(board.legal_moves, key=lambda m: not board.gives_check(m))
            for move in moves:
                self.tick()
                board.push(move)
                try:
                    if board.is_checkmate():
                        found = [move]
                    elif not board.is_stalemate():
                        rest = self.defend(board, k - 1)
                        if rest is not None:
                            found = [move, *rest]
                finally:
                    board.pop()
                if found is not None:
                    break
        self.table[key] = found
        return found

    def defend(self, board: chess.Board, k: int) -> list[chess.Move] | None:
        """The defender to move: the attacker's mate within k after every reply (the line after
        the first reply), or None when some reply escapes."""
        line: list[chess.Move] | None = None
        for reply in board.legal_moves:
            self.tick()
            board.push(reply)
            try:
                rest = self.attack(board, k)
            finally:
                board.pop()
            if rest is None:
                return None
            if line is None:
                line = [reply, *rest]
        return line


def mate_within(board: chess.Board, k: int, budget: int = 5_000_000) -> list[chess.Move] | None:
    """A mating line (attacker, defender, ..., mate) if the side to move mates within k moves
    whatever the defence, else None (proved). Raises Unknown past `budget` positions."""
    if k < 1:
        raise ValueError("k must be at least 1")
    return _Search(budget).attack(board.copy(stack=False), k)


def shortest_mate(
    board: chess.Board, kmax: int, budget: int = 5_000_000
) -> tuple[int, list[chess.Move]] | None:
    """The least k <= kmax with a forced mate in k and a line for it, or None (proved: no mate in
    kmax or fewer). Raises Unknown past `budget` positions (shared by all k)."""
    search = _Search(budget)
    work = board.copy(stack=False)
    for k in range(1, kmax + 1):
        line = search.attack(work, k)
        if line is not None:
            return k, line
    return None
