"""Ghost moves judged by the shipped solver: exact values from the word list.

`games.word.ghost_values` (the solver the `ghost_solver` agent plays with) gives every legal
action its value for the mover with perfect play by both sides afterwards: +1 won, -1 lost. A
letter that completes a word or makes a dead fragment is lost (the opponent challenges), a
challenge wins exactly when no word starts with the fragment. So a move loses 2 (a won position
thrown away) or nothing, and on the winning-chances scale (returns -1..1) every loss is a blunder.

Limits: exact for the game as the referee plays it (the same word list and `min_word_length`);
the best move named is one winning move (letters first, in alphabet order, then the challenge),
where several exist. Values are cached per word list per process.
"""

from __future__ import annotations

import sys

import pyspiel

from analysis.exact import exact_verdict
from analysis.scale import Reference
from analysis.verdict import NoReference, Verdict
from games.word.ghost import GhostGame
from games.word.ghost_values import action_value, get_solver, solver_lock


class GhostJudge:
    def __init__(self, game: pyspiel.Game) -> None:
        if not isinstance(game, GhostGame):
            raise NoReference(f"{game.get_type().short_name} is not ghost")
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))  # one level per letter
        self.solver = get_solver(game.words_name, game.min_len)
        self.lo, self.hi = game.min_utility(), game.max_utility()
        self.reference = Reference(
            name="exact",
            detail=f"Ghost solver (games/word/ghost_values.py), word list {game.words_name}, "
            f"words of {game.min_len}+ letters",
            exact=True,
            unit="return",
            limits="perfect play by both sides afterwards; one winning move named where several exist",
        )

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        fragment: str = state.fragment
        with solver_lock:
            values = {a: action_value(self.solver, fragment, a) for a in state.legal_actions()}
        return exact_verdict(values, action, self.lo, self.hi)
