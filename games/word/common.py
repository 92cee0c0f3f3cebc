"""Shared pieces of the word games: the alphabet and a text-only observer.

Limit: the observer gives strings only (`tensor` is empty), which is all an
LLM needs; tensor-based learners (AlphaZero, CFR with tensors) are not supported.
"""

from __future__ import annotations

from typing import Any, Protocol

import numpy as np
import pyspiel

LETTERS = "abcdefghijklmnopqrstuvwxyz"


class TextViewState(Protocol):
    def text_view(self, player: int) -> str: ...


class TextObserver:
    """PyObserver (see open_spiel/python/observation.py) with a string view and no tensor."""

    def __init__(self, iig_obs_type: Any = None, params: dict[str, Any] | None = None) -> None:
        if params:
            raise ValueError(f"observation parameters not supported; passed {params}")
        self.tensor = np.zeros(0, np.float32)
        self.dict: dict[str, np.ndarray] = {}

    def set_from(self, state: Any, player: int) -> None:
        """Nothing to fill: there is no tensor."""

    def string_from(self, state: TextViewState, player: int) -> str:
        return state.text_view(player)


class WordGame(pyspiel.Game):
    """What the three word games share: states share their game, text-only observers, and a
    `rules_text()` for the referee to send with a match's first turn."""

    def rules_text(self) -> str:
        raise NotImplementedError

    def __deepcopy__(self, memo: dict[int, Any]) -> WordGame:
        # States keep a reference to their game; cloning a state (deepcopy) must share it, not copy it.
        return self

    def make_py_observer(
        self, iig_obs_type: Any = None, params: dict[str, Any] | None = None
    ) -> TextObserver:
        return TextObserver(iig_obs_type, params)
