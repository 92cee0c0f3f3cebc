"""`SB3BusVecEnv`: many matches on the bus at once as a Stable-Baselines3 `VecEnv`, masks included.

Stable-Baselines3 and sb3-contrib (MaskablePPO) take their own `VecEnv`, not Gymnasium's vector API,
and step it in two halves, `step_async(actions)` then `step_wait()`. Wrapping `BusEnv`s in SB3's
`DummyVecEnv` would work but step them one after another, one match's round trip at a time; this
class sends every action first and only then waits for every reply (as `BusVectorEnv` does), so the
referee plays all the matches concurrently.

SB3's conventions, which differ from Gymnasium's vector API: a sub-environment whose episode ended
is reset within the same `step_wait` (its final observation in `info["terminal_observation"]`,
`info["TimeLimit.truncated"]` for a `max_turns` cut), and every done sub-environment's new match is
started before any is waited for. `env_method("action_masks")` (what MaskablePPO asks) returns each
sub-environment's current `action_mask` as booleans; no other method or attribute of the
sub-environments is reachable (`AttributeError`, but `render_mode`, None), since they live on the bus side.

Needs the `train` extra (stable-baselines3); `spielbus.env` does not import this module.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvStepReturn

from referee.config import TournamentConfig
from spielbus.env.gym_env import Answers, BusEnv
from spielbus.env.session import TrainingSession
from spielbus.env.vector_env import BusVectorEnv
from spielbus.env.views import Obs

MASKS = "action_masks"


class SB3BusVecEnv(VecEnv):
    """`num_envs` learning seats on one session (arguments as `BusVectorEnv`'s)."""

    def __init__(
        self,
        config: TournamentConfig | str | Path | None = None,
        *,
        num_envs: int,
        session: TrainingSession | None = None,
        opponents: list[str] | None = None,
        seat: int | None = 0,
        tensors: bool = True,
        **session_options: Any,
    ) -> None:
        # BusVectorEnv builds the sub-environments on one session and owns it when it made it.
        self.vector = BusVectorEnv(
            config,
            num_envs=num_envs,
            session=session,
            opponents=opponents,
            seat=seat,
            tensors=tensors,
            **session_options,
        )
        self.envs = self.vector.envs
        super().__init__(num_envs, self.vector.single_observation_space, self.vector.single_action_space)
        self.session = self.vector.session
        self._obs: list[Obs] = []
        self._actions: np.ndarray | None = None

    def _batched(self) -> dict[str, np.ndarray]:
        return {key: np.stack([o[key] for o in self._obs]) for key in self._obs[0]}

    def reset(self) -> dict[str, np.ndarray]:
        extras = []
        for env, seed, options in zip(self.envs, self._seeds, self._options, strict=True):
            gym.Env.reset(env, seed=seed)  # seeds the sub-environment's RNG as `Env.reset` does
            extras.append(env._begin_reset(options or None))
        self._obs = []
        self.reset_infos = []
        for env, extra in zip(self.envs, extras, strict=True):
            obs, info = env._finish_reset(extra)
            self._obs.append(obs)
            self.reset_infos.append(info)
        self._reset_seeds()
        self._reset_options()
        return self._batched()

    def step_async(self, actions: np.ndarray) -> None:
        if len(actions) != self.num_envs:
            raise ValueError(f"{len(actions)} actions for {self.num_envs} environments")
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() without step_async()")
        actions, self._actions = self._actions, None
        answers: Answers = []  # every answer in one hand-off to the session's loop
        sent = [env._send(a, answers) for env, a in zip(self.envs, actions, strict=True)]
        BusEnv.send_batch(answers)
        rewards = np.zeros(self.num_envs, np.float32)
        dones = np.zeros(self.num_envs, np.bool_)
        infos: list[dict[str, Any]] = []
        for i, env in enumerate(self.envs):
            obs, reward, terminated, truncated, info = env._receive(sent[i])
            rewards[i], dones[i] = float(reward), terminated or truncated
            if dones[i]:
                info["TimeLimit.truncated"] = truncated and not terminated
                info["terminal_observation"] = obs
            self._obs[i] = obs
            infos.append(info)
        # Every new match started before any is waited for, as in `reset`.
        done = [int(i) for i in np.flatnonzero(dones)]
        restarted = {i: self.envs[i]._begin_reset(None) for i in done}
        for i in done:
            self._obs[i], self.reset_infos[i] = self.envs[i]._finish_reset(restarted[i])
        return self._batched(), rewards, dones, infos

    def close(self) -> None:
        self.vector.close()

    def _indices(self, indices: VecEnvIndices) -> Sequence[int]:
        if indices is None:
            return range(self.num_envs)
        if isinstance(indices, int):
            return [indices]
        return list(indices)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        if method_name != MASKS or method_args or method_kwargs:
            raise AttributeError(f"the bus environments answer only {MASKS}(), not {method_name}")
        return [self._obs[i]["action_mask"].astype(bool) for i in self._indices(indices)]

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        if attr_name == "render_mode":  # asked by SB3's constructor: the bus environments draw nothing
            return [None for _ in self._indices(indices)]
        if attr_name != MASKS:
            raise AttributeError(f"the bus environments expose only {MASKS}, not {attr_name}")
        return [lambda i=i: self._obs[i]["action_mask"].astype(bool) for i in self._indices(indices)]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise AttributeError(f"the bus environments' attributes cannot be set ({attr_name})")

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None) -> list[bool]:
        return [False for _ in self._indices(indices)]
