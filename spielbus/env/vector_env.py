"""`BusVectorEnv`: many matches on the bus at once, through Gymnasium's vector API.

`num_envs` `BusEnv`s share one `TrainingSession` (one bus connection, one referee, one learner agent
serving every learning seat, the opponents started once). `step(actions)` sends every action first
and only then waits for every reply, so the referee plays all the matches concurrently: while one
match waits for an opponent's move, the others go on. That is where the throughput comes from
(benchmarks/env_throughput.py, docs/env.md).

Autoreset is Gymnasium's default, `NEXT_STEP`: the step after a sub-environment's episode ended
resets it (its action is ignored) and returns the new episode's first observation with reward 0.
`reset(options=...)` (`opponents`, `seat`) holds for every autoreset until the next `reset()`.
Infos are batched with Gymnasium's `_add_info` (arrays with `_key` masks), except `legal` and `json`,
which stay one object per sub-environment (an object array): `_add_info` would split a dict by key.
A bad action anywhere in the batch raises `ValueError` before any action is sent.
"""

from __future__ import annotations

from copy import deepcopy
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from referee.config import TournamentConfig
from spielbus.env.gym_env import Answers, BusEnv, action_id
from spielbus.env.session import TrainingSession, session_for
from spielbus.env.views import Obs

# Info entries kept whole per sub-environment (dicts that `_add_info` would split by key).
WHOLE = ("legal", "json")


class BusVectorEnv(VectorEnv[dict[str, np.ndarray], np.ndarray, np.ndarray]):
    """`num_envs` learning seats, each in its own match, on one session."""

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
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, not {num_envs}")
        self.session, self._owns_session = session_for(config, session, session_options)
        try:
            self.envs = [
                BusEnv(session=self.session, opponents=opponents, seat=seat, tensors=tensors)
                for _ in range(num_envs)
            ]
        except BaseException:
            if self._owns_session:
                self.session.close()
            raise
        self.num_envs = num_envs
        self.metadata = {**self.envs[0].metadata, "autoreset_mode": AutoresetMode.NEXT_STEP}
        self.render_mode = None
        self.single_observation_space = self.envs[0].observation_space
        self.single_action_space = self.envs[0].action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._obs: list[Obs | None] = [None] * num_envs
        # A Dict space batches to a dict of arrays.
        self._batch: Any = create_empty_array(self.single_observation_space, n=num_envs, fn=np.zeros)
        self._autoreset = np.zeros(num_envs, np.bool_)
        self._options: dict[str, Any] = {}  # reset()'s options, kept for the autoresets that follow

    def _batched(self) -> dict[str, np.ndarray]:
        self._batch = concatenate(self.single_observation_space, self._obs, self._batch)
        out: dict[str, np.ndarray] = deepcopy(self._batch)
        return out

    def _add(self, infos: dict[str, Any], info: dict[str, Any], i: int) -> dict[str, Any]:
        infos = self._add_info(infos, {k: v for k, v in info.items() if k not in WHOLE}, i)
        for key in WHOLE:
            if key in info:
                infos.setdefault(key, np.full(self.num_envs, None, dtype=object))[i] = info[key]
                infos.setdefault(f"_{key}", np.zeros(self.num_envs, np.bool_))[i] = True
        return infos

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        seeds: list[int | None]
        if seed is None or isinstance(seed, int):
            seeds = [None if seed is None else seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"{len(seeds)} seeds for {self.num_envs} environments")
        self._options = dict(options or {})
        extras = []
        for env, s in zip(self.envs, seeds, strict=True):
            # Seeded here (as `Env.reset(seed=...)` does), then every match starts before any is waited for.
            super(BusEnv, env).reset(seed=s)
            extras.append(env._begin_reset(options))
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            self._obs[i], info = env._finish_reset(extras[i])
            infos = self._add(infos, info, i)
        self._autoreset[:] = False
        return self._batched(), infos

    def step(
        self, actions: np.ndarray
    ) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        batch = list(iterate(self.action_space, actions))
        if len(batch) != self.num_envs:
            raise ValueError(f"{len(batch)} actions for {self.num_envs} environments")
        for i, action in enumerate(batch):
            if not self._autoreset[i]:
                action_id(action, self.envs[i].views.num_actions)  # all checked before any is sent
        sent: list[dict[str, Any]] = []
        answers: Answers = []  # every answer in one hand-off to the session's loop
        for i, (env, action) in enumerate(zip(self.envs, batch, strict=True)):
            sent.append(env._begin_reset(self._options) if self._autoreset[i] else env._send(action, answers))
        BusEnv.send_batch(answers)
        rewards = np.zeros(self.num_envs, np.float64)
        terminations = np.zeros(self.num_envs, np.bool_)
        truncations = np.zeros(self.num_envs, np.bool_)
        infos: dict[str, Any] = {}
        for i, env in enumerate(self.envs):
            if self._autoreset[i]:
                self._obs[i], info = env._finish_reset(sent[i])
            else:
                self._obs[i], reward, terminations[i], truncations[i], info = env._receive(sent[i])
                rewards[i] = float(reward)
            infos = self._add(infos, info, i)
        self._autoreset = terminations | truncations
        return self._batched(), rewards, terminations, truncations, infos

    def close_extras(self, **kwargs: Any) -> None:
        for env in self.envs:
            env.close()
        if self._owns_session:
            self.session.close()
