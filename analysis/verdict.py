"""What every reference answers for one move, before it becomes a row (`analysis.scale`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import pyspiel

from analysis.scale import Reference


@dataclass(frozen=True)
class Verdict:
    """Values for the mover, in the reference's unit, and the same two on the winning-chances scale."""

    value_before: float
    value_played: float
    value_best: float
    best_action: int
    wc_played: float
    wc_best: float
    uncertainty: float | None = None
    cp_loss: float | None = None


class Judge(Protocol):
    reference: Reference

    def judge(self, game: pyspiel.Game, state: pyspiel.State, history: list[int], action: int) -> Verdict:
        """The verdict on `action` played by the player to move in `state` (reached by `history`)."""
        ...


def two_player_zero_sum(game: pyspiel.Game, *, perfect: bool) -> bool:
    """A two-player zero-sum game of sequential moves, of perfect information or not (`perfect`)."""
    t = game.get_type()
    return (
        game.num_players() == 2
        and t.utility == pyspiel.GameType.Utility.ZERO_SUM
        and t.dynamics == pyspiel.GameType.Dynamics.SEQUENTIAL
        and (t.information == pyspiel.GameType.Information.PERFECT_INFORMATION) == perfect
    )


class NoReference(Exception):
    """The game has no reference here (the message says why): its moves are not scored."""
