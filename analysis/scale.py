"""One row of `analysis.jsonl` and the scale every reference's loss is judged on.

A reference (an engine, an exact solver, an equilibrium, a search) gives, for the seat to move,
a value of the position before the move, of the move played and of its best move, in its own
unit (centipawns, expected return, chips). The loss is `value_best - value_played` in that unit.
To judge losses from different references alike, each is also put on one scale, the
*winning-chances* scale of Lichess (a value in [-1, 1]: -1 certain loss, +1 certain win):

- chess: Lichess's own map from centipawns, `wc = 2 / (1 + exp(-0.00368208 * cp)) - 1`
  (https://lichess.org/page/accuracy), with the centipawns capped at +-1000 and a mate counted
  as the cap, as Lichess's lila does;
- every other game: the value in the game's utility range mapped linearly onto [-1, 1]
  (`2 * (v - min_utility) / (max_utility - min_utility) - 1`), so a loss of the whole range is 2.
  For a win/draw/loss game (returns -1, 0, 1) this is the expected return itself; for Kuhn poker
  (returns -2..2) one chip is 0.5.

Classes, on the winning-chances loss `wc_loss` (Lichess's judgement thresholds, lila's
`Advice.scala`: 0.1 inaccuracy, 0.2 mistake, 0.3 blunder):

    best        the played move is the reference's best move, or loses nothing (`wc_loss` <= 1e-9)
    good        0      < wc_loss < 0.1
    inaccuracy  0.1   <= wc_loss < 0.2
    mistake     0.2   <= wc_loss < 0.3
    blunder     0.3   <= wc_loss

Accuracy per move is Lichess's formula on the drop of Win% (`50 + 50 * wc`):
`103.1668 * exp(-0.04354 * drop) - 3.1669`, clamped to [0, 100] (https://lichess.org/page/accuracy).

Limits: an estimate (a search, `exact = false`) can misjudge a move by its `uncertainty` and more
(a search also has a bias); a chess engine at fixed nodes is an estimate too, a strong one. A
loss below zero (the played move scored above the reference's best, search noise) is counted 0.
"""

from __future__ import annotations

import math
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

MoveClass = Literal["best", "good", "inaccuracy", "mistake", "blunder"]
CLASSES: tuple[MoveClass, ...] = ("best", "good", "inaccuracy", "mistake", "blunder")
# Lichess's winning-chances thresholds (lila, modules/analyse/src/main/Advice.scala).
INACCURACY, MISTAKE, BLUNDER = 0.1, 0.2, 0.3
CP_CAP = 1000  # lila caps centipawns at +-1000 before the winning-chances map
_TIE = 1e-9

STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


class Reference(BaseModel):
    """Who judged a move, and what its numbers are worth."""

    model_config = STRICT
    name: str = Field(description="e.g. `stockfish`, `exact`, `equilibrium`, `mcts`")
    detail: str = Field(
        description="version and limit: `Stockfish 15.1, 20000 nodes`, `CFR+ 2000 iterations`"
    )
    exact: bool = Field(description="true only for a proven value (a full solve)")
    unit: str = Field(description="the unit of the values and the loss: `cp`, `return`, `chips`")
    limits: str = Field(description="what the reference cannot see or may get wrong")


class MoveAnalysis(BaseModel):
    """One scored move of a match: a line of `analysis.jsonl`."""

    model_config = STRICT
    match_id: str
    game: str
    index: int = Field(description="position of the step in the record's `moves` (chance steps included)")
    turn: int
    seat: int
    agent: str
    action: int
    text: str
    forced: bool = Field(default=False, description="played by the referee for the seat (random policy)")
    fallback: bool = Field(
        default=False, description="the agent marked it a fallback (`stats.fallback`): its LLM failed"
    )
    value_before: float = Field(description="the reference's value of the position for the mover")
    value_played: float
    value_best: float
    best_action: int
    best_text: str
    loss: float = Field(ge=0, description="value_best - value_played, in the reference's unit")
    wc_loss: float = Field(ge=0, description="the loss on the winning-chances scale ([-1, 1] values)")
    wc_played: float | None = Field(
        default=None, ge=-1, le=1, description="the mover's winning chances after the move ([-1, 1])"
    )
    accuracy: float = Field(ge=0, le=100, description="Lichess's per-move accuracy, percent")
    cls: MoveClass
    uncertainty: float | None = Field(
        default=None, description="estimates: 95% half-width of value_played and value_best, in the unit"
    )
    cp_loss: float | None = Field(default=None, description="chess: centipawn loss (capped at +-1000)")
    reference: Reference
    analysis_ms: float = Field(ge=0, description="time the reference took for this move")


def winning_chances_cp(cp: float) -> float:
    """Lichess's winning chances of a centipawn score (capped at +-1000), in [-1, 1]."""
    cp = max(-CP_CAP, min(CP_CAP, cp))
    return 2 / (1 + math.exp(-0.00368208 * cp)) - 1


def winning_chances_range(value: float, lo: float, hi: float) -> float:
    """A value in the utility range [lo, hi] mapped linearly onto [-1, 1]."""
    return 2 * (value - lo) / (hi - lo) - 1


def accuracy(wc_loss: float) -> float:
    """Lichess's move accuracy (percent) for a drop of `wc_loss` in winning chances."""
    if wc_loss <= _TIE:
        return 100.0  # Lichess: a move that keeps the winning chances is 100
    drop = 50 * wc_loss  # Win% = 50 + 50 * wc
    return max(0.0, min(100.0, 103.1668 * math.exp(-0.04354 * drop) - 3.1669))


def classify(wc_loss: float, played_is_best: bool) -> MoveClass:
    if played_is_best or wc_loss <= _TIE:
        return "best"
    if wc_loss >= BLUNDER:
        return "blunder"
    if wc_loss >= MISTAKE:
        return "mistake"
    if wc_loss >= INACCURACY:
        return "inaccuracy"
    return "good"
