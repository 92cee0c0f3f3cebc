"""What a learning seat observes: Gymnasium spaces of a game, and observations built from turns.

The observation is a dict: `action_mask` (int8, one entry per OpenSpiel action id, 1 where the
action is legal) and, where the game has one, `observation`: the seat's OpenSpiel tensor as the
referee sent it in the turn (float32). Imperfect-information games use the information-state tensor
(what the seat knows of the whole match), perfect-information ones the observation tensor (the board);
each falls back to the other. A game with neither has `action_mask` only. The text and JSON views
go in `info` (`text`, `json`, `legal`), so a text or LLM learner reads what an LLM agent reads.

Limits: the tensor bounds are not declared (the Box is unbounded: OpenSpiel documents no ranges, and
poker tensors hold chip counts); the text view is not a Gymnasium space (Gymnasium's `Text` space
needs a fixed character set).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyspiel
from gymnasium import spaces

from bus.protocol import Turn
from games.view import is_perfect_information

Obs = dict[str, np.ndarray]


class Views:
    """The spaces of one game for a learning seat, and its observations and infos from turns."""

    def __init__(self, game: pyspiel.Game, tensors: bool = True) -> None:
        gt = game.get_type()
        self.num_actions = int(game.num_distinct_actions())
        have = {
            "information_state_tensor": (
                gt.provides_information_state_tensor,
                game.information_state_tensor_size,
            ),
            "observation_tensor": (gt.provides_observation_tensor, game.observation_tensor_size),
        }
        order = ["observation_tensor", "information_state_tensor"]
        if not is_perfect_information(game):
            order.reverse()
        self.tensor: str | None = next((k for k in order if tensors and have[k][0]), None)
        self.tensor_size = int(have[self.tensor][1]()) if self.tensor is not None else 0
        members: dict[str, spaces.Space[Any]] = {
            "action_mask": spaces.Box(0, 1, (self.num_actions,), np.int8),
        }
        if self.tensor is not None:
            members["observation"] = spaces.Box(-np.inf, np.inf, (self.tensor_size,), np.float32)
        self.observation_space = spaces.Dict(members)
        self.action_space = spaces.Discrete(self.num_actions)

    def observe(self, turn: Turn) -> Obs:
        mask = np.zeros(self.num_actions, np.int8)
        mask[[a.id for a in turn.legal_actions]] = 1
        out = {"action_mask": mask}
        if self.tensor is not None:
            values = getattr(turn, self.tensor)
            if values is None:
                raise ValueError(f"turn {turn.turn} of {turn.match_id} carries no {self.tensor}")
            out["observation"] = np.asarray(values, np.float32)
        return out

    def final(self, last: Obs | None) -> Obs:
        """The observation at the end of a match: the last one seen, with no legal action."""
        out = {"action_mask": np.zeros(self.num_actions, np.int8)}
        if self.tensor is not None:
            size = self.tensor_size
            out["observation"] = (
                last["observation"].copy() if last is not None else np.zeros(size, dtype=np.float32)
            )
        return out

    @staticmethod
    def info(turn: Turn) -> dict[str, Any]:
        """The turn's text and JSON views and its legal actions with their texts (fresh objects)."""
        info: dict[str, Any] = {
            "text": turn.observation,
            "json": turn.observation_json,
            "legal": {a.id: a.text for a in turn.legal_actions},
            "seat": turn.seat,
        }
        if turn.retry is not None:
            info["retry"] = turn.retry  # the referee refused the previous answer (retry policy)
        return info


def pays_along(game: pyspiel.Game) -> bool:
    """A perfect-information game that pays along the way (OpenSpiel's `REWARDS` model: 2048, cliff
    walking, ...): its per-step rewards can be replayed from a turn's true action list (`state`)."""
    gt = game.get_type()
    return gt.reward_model == pyspiel.GameType.RewardModel.REWARDS and is_perfect_information(game)


def earned(game: pyspiel.Game, actions: list[int], seat: int) -> float:
    """What `seat` has earned over `actions` (the true action list from the initial state)."""
    state = game.new_initial_state()
    total = 0.0
    for action in actions:
        state.apply_action(action)
        total += float(state.rewards()[seat])
    return total
