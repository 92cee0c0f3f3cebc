"""What the Code World Models games share: text-only observers that tell an observation (the
present) from an information state (the present plus everything the seat saw before), and a log
of events rendered per viewer.

Builds on `games.word.common` (the text-only observer and the game base class with `rules_text()`
and state-sharing `__deepcopy__`). Limit, as there: strings only, no tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import pyspiel

from games.word.common import TextObserver, WordGame


class SeatViewState(Protocol):
    def text_view(self, player: int) -> str: ...

    def info_view(self, player: int) -> str: ...


class SeatObserver(TextObserver):
    """`observation_string` is `text_view` (the present); `information_state_string` (perfect
    recall) is `info_view`, which adds the seat's own log of what it has seen."""

    def __init__(self, iig_obs_type: Any = None, params: dict[str, Any] | None = None) -> None:
        super().__init__(iig_obs_type, params)
        self.perfect_recall = iig_obs_type is not None and bool(iig_obs_type.perfect_recall)

    # The ignore: `state` is narrower than TextObserver's; this observer only serves games whose
    # states are SeatViewStates (OpenSpiel hands it the game's own states).
    def string_from(self, state: SeatViewState, player: int) -> str:  # type: ignore[override]
        return state.info_view(player) if self.perfect_recall else state.text_view(player)


class PaperGame(WordGame):
    """Base of our games from "Code World Models for General Game Playing" (Lehrach et al.)."""

    def make_py_observer(
        self, iig_obs_type: Any = None, params: dict[str, Any] | None = None
    ) -> SeatObserver:
        return SeatObserver(iig_obs_type, params)


@dataclass
class EventLog:
    """Events of a match, each with a public text and optional private texts for some seats.

    A seat reads the private text where it has one, else the public text, else nothing (an event
    with neither is invisible to it). Two histories a seat cannot tell apart must render the same.
    """

    events: list[tuple[str | None, dict[int, str]]] = field(default_factory=list)

    def add(self, public: str | None, private: dict[int, str] | None = None) -> None:
        self.events.append((public, dict(private or {})))

    def lines(self, viewer: int) -> list[str]:
        out = []
        for public, private in self.events:
            text = private.get(viewer, public)
            if text is not None:
                out.append(text)
        return out


def to_move(state: pyspiel.State) -> int | None:
    """The seat to act, None at chance nodes and at the end (for JSON views)."""
    p = state.current_player()
    return p if p >= 0 else None
