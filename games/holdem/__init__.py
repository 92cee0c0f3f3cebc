"""The simplified Texas Hold'em of "LLM Coaching LLM in Self-Play Training" as an OpenSpiel
Python game: `simplified_holdem` (rules, parameters and limits in `games.holdem.game`).

Importing this package registers the game with `pyspiel.register_game`.
"""

from __future__ import annotations

from games.holdem import game

__all__ = ["game"]
