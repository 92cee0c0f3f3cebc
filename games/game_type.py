"""The `pyspiel.GameType` of our own Python games, which all share one shape: sequential turns,
rewards only at the end, and text views only (an information-state and an observation string per
player, no tensors). Each game names just what differs."""

from __future__ import annotations

from typing import Any

import pyspiel


def text_game_type(
    short_name: str,
    long_name: str,
    *,
    chance_mode: pyspiel.GameType.ChanceMode,
    information: pyspiel.GameType.Information,
    utility: pyspiel.GameType.Utility,
    parameters: dict[str, Any],
    max_num_players: int = 2,
    min_num_players: int = 2,
) -> pyspiel.GameType:
    return pyspiel.GameType(
        short_name=short_name,
        long_name=long_name,
        dynamics=pyspiel.GameType.Dynamics.SEQUENTIAL,
        chance_mode=chance_mode,
        information=information,
        utility=utility,
        reward_model=pyspiel.GameType.RewardModel.TERMINAL,
        max_num_players=max_num_players,
        min_num_players=min_num_players,
        provides_information_state_string=True,
        provides_information_state_tensor=False,
        provides_observation_string=True,
        provides_observation_tensor=False,
        parameter_specification=parameters,
    )
