"""`ghost_solver`: plays Ghost perfectly from the word list (the ceiling for LLM agents).

The exact game value comes from `games.word.ghost_values` (memoised negamax over the live
fragments; the analysis judges Ghost moves with the same values).

Play: challenge a dead fragment (the opponent bluffed or blundered); in a won
position, a random winning letter; in a lost position, the live letter with the
longest continuation (to give the opponent most room to err), else a bluff
(a dead letter that does not complete a word), else any letter.

Limits: those of `games.word.ghost_values` (values cached per word list per process); only
the `ghost` game is accepted.
"""

from __future__ import annotations

import sys

from agents.base import Decision, MatchContext, Strategy, StrategyOptions, decision_rng, run_cpu
from bus.protocol import MoveStats, Turn
from games.loader import load_game_async, replay
from games.word.ghost import CHALLENGE, GhostGame
from games.word.ghost_values import get_solver
from games.word.ghost_values import solver_lock as _lock


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
