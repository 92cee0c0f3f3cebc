"""Exact values of small two-player zero-sum perfect-information games, by a full search.

The value of a state for player 0 is its minimax value (the mover takes the best child for
itself; a chance node the probability-weighted mean), memoised on the state's text, its move
number and the player to move, so transpositions are searched once. The memo is kept per game for
the life of the process: scoring every move of every tic-tac-toe match costs one solve (4,520
non-terminal positions).

The bound: a game is solved exactly only while the memo holds at most `MAX_POSITIONS` (250,000)
distinct positions and its `max_game_length` is at most `MAX_DEPTH` (100). Past either, `TooLarge`
is raised and the game goes to the estimate (`analysis.estimate`). Tic-tac-toe and its variants fit;
connect four, chess and go do not.

Limits: two players, zero-sum utility, sequential moves (no simultaneous nodes). Transpositions
are merged by OpenSpiel's `ToString` of the state, which for OpenSpiel's perfect-information board
games is the whole position; a game whose text left out part of its state would be misjudged.
"""

from __future__ import annotations

import pyspiel

from analysis.scale import Reference, winning_chances_range
from analysis.verdict import Verdict, two_player_zero_sum

MAX_POSITIONS = 250_000
MAX_DEPTH = 100


class TooLarge(Exception):
    """The game does not fit the exact solver's bound."""


def solvable(game: pyspiel.Game) -> bool:
    """Whether the game is of the kind this solver handles (its size is found out by solving)."""
    return two_player_zero_sum(game, perfect=True) and game.max_game_length() <= MAX_DEPTH


class ExactJudge:
    def __init__(self, game: pyspiel.Game, max_positions: int = MAX_POSITIONS) -> None:
        if not solvable(game):
            raise TooLarge(f"{game.get_type().short_name} is not a small two-player zero-sum sequential game")
        self.max_positions = max_positions
        self.memo: dict[tuple[int, int, str], float] = {}
        self.lo, self.hi = game.min_utility(), game.max_utility()
        self.value(game.new_initial_state())  # the whole game once, so the bound is checked now
        self.reference = Reference(
            name="exact",
            detail=f"full minimax search, {len(self.memo)} positions (bound {max_positions})",
            exact=True,
            unit="return",
            limits="perfect play by both sides afterwards; positions merged by their text",
        )

    def value(self, state: pyspiel.State) -> float:
        """Player 0's minimax value of `state`."""
        if state.is_terminal():
            return float(state.returns()[0])
        key = (state.move_number(), state.current_player(), str(state))
        got = self.memo.get(key)
        if got is not None:
            return got
        if state.is_chance_node():
            v = sum(p * self.value(state.child(a)) for a, p in state.chance_outcomes())
        else:
            children = [self.value(state.child(a)) for a in state.legal_actions()]
            v = max(children) if state.current_player() == 0 else min(children)
        if len(self.memo) >= self.max_positions:
            raise TooLarge(f"more than {self.max_positions} positions")
        self.memo[key] = v
        return v

    def action_values(self, state: pyspiel.State) -> dict[int, float]:
        """Each legal action's value for the player to move."""
        sign = 1.0 if state.current_player() == 0 else -1.0
        return {a: sign * self.value(state.child(a)) for a in state.legal_actions()}

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        return exact_verdict(self.action_values(state), action, self.lo, self.hi)


def exact_verdict(values: dict[int, float], action: int, lo: float, hi: float) -> Verdict:
    """The verdict from every legal action's exact value (returns in [lo, hi]); ties go to the move played."""
    best_action = max(values, key=lambda a: (values[a], a == action))
    best, played = values[best_action], values[action]
    return Verdict(
        value_before=best,
        value_played=played,
        value_best=best,
        best_action=best_action,
        wc_played=winning_chances_range(played, lo, hi),
        wc_best=winning_chances_range(best, lo, hi),
    )
