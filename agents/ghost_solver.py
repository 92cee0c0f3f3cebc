"""`ghost_solver`: plays Ghost perfectly from the word list (the ceiling for LLM agents).

The exact game value is computed by memoised negamax over the live fragments
(prefixes of words of at least `min_word_length` letters that are not words):
a player to move at a live fragment wins iff some letter leads to a live
fragment, not a word, from which the opponent loses. Letters that make a dead
fragment lose to a challenge, letters that complete a word lose at once, and a
challenge of a live fragment loses, so a perfect player never bluffs when
winning.

Play: challenge a dead fragment (the opponent bluffed or blundered); in a won
position, a random winning letter; in a lost position, the live letter with the
longest continuation (to give the opponent most room to err), else a bluff
(a dead letter that does not complete a word), else any letter.

Limits: values are cached per (word list, min_word_length) per process (about
a second and tens of MB for the 110k list); only the `ghost` game is accepted.
"""

from __future__ import annotations

import functools
import random
import sys
import threading

from agents.base import Decision, MatchContext, Strategy, StrategyOptions, decision_rng, run_cpu
from bus.protocol import MoveStats, Turn
from games.loader import load_game_async, replay
from games.word.common import LETTERS
from games.word.ghost import CHALLENGE, GhostGame
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


_lock = threading.Lock()


@functools.lru_cache(maxsize=8)
def _solver(words_name: str, min_len: int) -> GhostSolver:
    return GhostSolver(words_name, min_len)


def get_solver(words_name: str, min_len: int) -> GhostSolver:
    with _lock:
        return _solver(words_name, min_len)


class GhostSolverStrategy(Strategy):
    kind = "ghost_solver"
    version = "1"
    games = ("ghost",)

    def __init__(self, options: StrategyOptions) -> None:
        super().__init__(options)
        # Negamax recursion goes one level per letter (longest words ~30); leave generous room.
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        if turn.state is None:
            raise ValueError("ghost_solver needs the full action list (`state`)")
        game = await load_game_async(turn.game)
        if not isinstance(game, GhostGame):
            raise ValueError(f"ghost_solver plays only ghost, not {turn.game.name}")
        # The solver is CPU work: on the CPU executor, not on the loop that serves every turn.
        return await run_cpu(ctx.deadline, self._solve, game, turn)

    def _solve(self, game: GhostGame, turn: Turn) -> Decision:
        state = replay(game, turn.state or [])
        solver = get_solver(game.words_name, game.min_len)
        can_add = any(la.id != CHALLENGE for la in turn.legal_actions)
        with _lock:  # the memo dicts are shared by every match of this process
            # One RNG per decision, from the seed and the seat's view: reproducible under concurrency.
            rng = decision_rng(self.options.seed, turn)
            action, reason = solver.best_action(state.fragment, rng, can_add)
            value = "win" if solver.wins(state.fragment) else "loss"
        stats = MoveStats(nodes=len(solver._value))
        return Decision(action=action, note=f"{reason} (value: {value})", stats=stats)
