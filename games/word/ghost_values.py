"""Ghost's exact values from the word list: the solver behind the `ghost_solver` agent and the analysis.

The exact game value is computed by memoised negamax over the live fragments (prefixes of words
of at least `min_word_length` letters that are not words): a player to move at a live fragment
wins iff some letter leads to a live fragment, not a word, from which the opponent loses. Letters
that make a dead fragment lose to a challenge, letters that complete a word lose at once, and a
challenge of a live fragment loses, so a perfect player never bluffs when winning. `action_value`
turns that into the value of any legal action for its mover (+1 won, -1 lost, with perfect play
by both sides afterwards).

Limits: values are cached per (word list, min_word_length) per process (about a second and tens
of MB for the 110k list); the recursion goes one level per letter (callers raise Python's
recursion limit: longest words are about 30 letters).
"""

from __future__ import annotations

import functools
import random
import threading

from games.word.common import LETTERS
from games.word.ghost import CHALLENGE
from games.word.wordlists import prefix_set, word_set


class GhostSolver:
    def __init__(self, words_name: str, min_len: int) -> None:
        self.prefixes = prefix_set(words_name, min_len)
        self.words = word_set(words_name, min_len)
        self._value: dict[str, bool] = {}
        self._depth: dict[str, int] = {}

    def is_live(self, f: str) -> bool:
        return f in self.prefixes and f not in self.words

    def wins(self, f: str) -> bool:
        """Does the player to move at fragment `f` win with perfect play?"""
        if f not in self.prefixes:
            return True  # dead fragment: challenge
        if f in self.words:
            return False  # cannot happen in play: completing a word ends the game
        v = self._value.get(f)
        if v is None:
            v = any(self.is_live(f + x) and not self.wins(f + x) for x in LETTERS)
            self._value[f] = v
        return v

    def depth(self, f: str) -> int:
        """Letters still addable along the longest word continuing `f`."""
        d = self._depth.get(f)
        if d is None:
            d = max((1 + self.depth(f + x) for x in LETTERS if f + x in self.prefixes), default=0)
            self._depth[f] = d
        return d

    def winning_letters(self, f: str) -> list[str]:
        return [x for x in LETTERS if self.is_live(f + x) and not self.wins(f + x)]

    def best_action(self, f: str, rng: random.Random, can_add: bool = True) -> tuple[int, str]:
        """(action id, reason) for the player to move at `f`."""
        if f and f not in self.prefixes:
            return CHALLENGE, "dead fragment"
        if not can_add:
            return CHALLENGE, "no letter can be added"
        win = self.winning_letters(f)
        if win:
            return LETTERS.index(rng.choice(win)), "won position"
        live = [x for x in LETTERS if self.is_live(f + x)]
        if live:
            best = max(self.depth(f + x) for x in live)
            return LETTERS.index(rng.choice([x for x in live if self.depth(f + x) == best])), "lost: stall"
        bluff = [x for x in LETTERS if f + x not in self.words]
        return LETTERS.index(rng.choice(bluff or list(LETTERS))), "lost: bluff"


solver_lock = threading.Lock()  # the memo dicts are shared by every user in a process


@functools.lru_cache(maxsize=8)
def _solver(words_name: str, min_len: int) -> GhostSolver:
    return GhostSolver(words_name, min_len)


def get_solver(words_name: str, min_len: int) -> GhostSolver:
    with solver_lock:
        return _solver(words_name, min_len)


def action_value(solver: GhostSolver, fragment: str, action: int) -> float:
    """The value (+1 / -1) of `action` for the player to move at `fragment`, both sides perfect after it."""
    if action == CHALLENGE:
        return -1.0 if fragment in solver.prefixes else 1.0
    after = fragment + LETTERS[action]
    if after in solver.words or after not in solver.prefixes:
        return -1.0  # completes a word, or a dead fragment that the opponent challenges
    return -1.0 if solver.wins(after) else 1.0
