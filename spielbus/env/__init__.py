"""Training environments over the bus: Gymnasium (`BusEnv`, `BusVectorEnv`) and PettingZoo
(`BusAECEnv`), whose opponents are any agents on the bus and whose matches the referee plays and
records like any other (marked `training`). docs/env.md is the guide. Needs the `env` extra
(`pip install 'spielbus[env]'`: gymnasium, pettingzoo)."""

from spielbus.env.aec_env import BusAECEnv
from spielbus.env.gym_env import BusEnv
from spielbus.env.session import EnvError, TrainingSession
from spielbus.env.vector_env import BusVectorEnv

__all__ = ["BusAECEnv", "BusEnv", "BusVectorEnv", "EnvError", "TrainingSession"]
