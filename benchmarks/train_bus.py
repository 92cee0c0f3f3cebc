"""Training through the bus against training in process (issue 44), in one run, per game.

(1) Raw environment steps per second, a learner picking uniformly random legal actions against a
    `random` opponent: (a) in process, a Gymnasium environment over OpenSpiel with the same spaces
    as the bus environments (`spielbus.env.views.Views`), the opponent a random legal move in this
    process; (b) `BusEnv`; (c) `BusVectorEnv(--envs)`. Ratios (b)/(a), (c)/(a).
(2) sb3-contrib's MaskablePPO, `MultiInputPolicy`, the same hyperparameters, seed and number of
    steps, one environment, in process and through `BusEnv` (the mask read from the observation's
    `action_mask`). Steps per second of `learn()` and the ratio bus / in process. Torch runs on one
    thread (`torch.set_num_threads(1)`): with its default (one per core, on cores the bus processes
    need too) both learners crawl. The hyperparameters are light ones by default (`n_steps` 256,
    4 epochs), which leave the environment the largest share of a step; `--hyperparameters sb3`
    takes sb3-contrib's own defaults (`n_steps` 2048, 10 epochs), what a new user trains with.
(2b) The same learner and hyperparameters (`n_steps` per sub-environment scaled so a rollout holds
    as many steps) on `--envs` environments at once: in process SB3's `DummyVecEnv` of in-process
    environments, through the bus `spielbus.env.sb3.SB3BusVecEnv` (every match on the bus at once).
    This is how a learner that is slower than the bus's round trip is meant to use it.
(3) The floor: a bare NATS request/reply (this process to a child process holding an echo, through
    an embedded nats-server), one at a time and 16 at a time. A learner's step against an
    opponent in another process holds at least one such round trip (the referee asks the
    opponent; the learner, in the referee's process, is asked there: spielbus/env/bridge.py), so
    the one-at-a-time rate bounds `BusEnv` and the 16-at-a-time rate bounds `BusVectorEnv(16)`,
    on this machine under this load, whatever the design. The script prints those bounds as
    ratios to the in-process rates: the best any bus design could reach here. Both ends run on
    the loop our processes run on (bus/loop.py).
(3b) The independent check of that floor (`benchmarks/raw_floor.py`): the same round trip with a
    minimal client of our own over blocking sockets, no nats.py and no event loop, the least a
    Python process can do through nats-server; its bounds are printed beside the first.
(4) The independent check of the goals: what the mainstream's own cross-process environments reach
    here, the in-process environment moved whole into worker processes, one pipe round trip per
    step and no broker, referee, validation or record. Raw steps: SB3's `SubprocVecEnv` and
    Gymnasium's `AsyncVectorEnv`, one environment and `--envs`; MaskablePPO on `SubprocVecEnv`,
    one environment and `--envs`, as sb3-contrib asks for masks (`env_method`, a second round trip
    per step) and with the masks read from the observations (`MasksFromObs`, its best case).
    Ratios to the same in-process rates as the bus's (`--no-mainstream` leaves it out).

The load average (1 minute) is printed with each game: on a shared machine the ratios hold for that
load. The learner sits in seat 0 in every phase.

    .venv/bin/python benchmarks/train_bus.py [--games tic_tac_toe connect_four] [--steps 2048]
        [--seconds 6] [--envs 16] [--hyperparameters light|sb3] [--no-train] [--no-mainstream]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gymnasium as gym
import numpy as np
import pyspiel
import raw_floor
from env_throughput import random_legal, single_rate, vector_rate
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv, VecEnv, VecEnvWrapper
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn

from bus import loop as bus_loop
from bus.server import EmbeddedNats
from games.loader import initial_state, load_game, parse_spec
from referee.config import parse_config
from spielbus.env import BusEnv, BusVectorEnv
from spielbus.env.views import Obs, Views

ROOT = Path(__file__).resolve().parent.parent
_SB3_LOGS = tempfile.TemporaryDirectory(prefix="train_bus-sb3-")
CONFIG = """
name = "train_bus"
deadline_ms = 60000
max_turns = 500
[[games]]
name = "{game}"
[agents.rand]
kind = "random"
options = {{ seed = 1 }}
"""
# sb3-contrib's own defaults (seeded), what a new user trains with (`--hyperparameters sb3`).
PPO_SB3_DEFAULTS: dict[str, Any] = {
    "n_steps": 2048,
    "batch_size": 64,
    "n_epochs": 10,
    "learning_rate": 3e-4,
    "seed": 0,
}
# The light set of the documented runs: shorter rollouts and fewer epochs, so the learner does the
# least per step and the environment's share is the largest.
PPO: dict[str, Any] = {**PPO_SB3_DEFAULTS, "n_steps": 256, "n_epochs": 4}
HYPERPARAMETERS = {"light": PPO, "sb3": PPO_SB3_DEFAULTS}


class LocalEnv(gym.Env[Obs, np.int64]):
    """The bus environments' game in process: same spaces and rewards, the opponent a random legal
    move from this process's RNG, the learner in seat 0."""

    def __init__(self, game: str, seed: int = 1) -> None:
        self.game = load_game(parse_spec(game))
        self.views = Views(self.game)
        self.observation_space = self.views.observation_space  # type: ignore[assignment]
        self.action_space = self.views.action_space
        self.rng = np.random.default_rng(seed)
        self.state: pyspiel.State = initial_state(self.game)

    def _opponents(self) -> None:
        while not self.state.is_terminal() and self.state.current_player() != 0:
            if self.state.is_chance_node():
                outcomes, probs = zip(*self.state.chance_outcomes(), strict=True)
                self.state.apply_action(int(self.rng.choice(outcomes, p=probs)))
            else:
                self.state.apply_action(int(self.rng.choice(self.state.legal_actions())))

    def _obs(self) -> Obs:
        mask = np.zeros(self.views.num_actions, np.int8)
        if not self.state.is_terminal():
            mask[self.state.legal_actions(0)] = 1
        out = {"action_mask": mask}
        if self.views.tensor is not None:
            out["observation"] = np.asarray(getattr(self.state, self.views.tensor)(0), np.float32)
        return out

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        super().reset(seed=seed)
        self.state = initial_state(self.game)
        self._opponents()
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        self.state.apply_action(int(action))
        self._opponents()
        done = self.state.is_terminal()
        return self._obs(), float(self.state.returns()[0]) if done else 0.0, done, False, {}


class MaskFromObs(gym.Wrapper[Obs, np.int64, Obs, np.int64]):
    """`action_masks()` for MaskablePPO: the last observation's `action_mask`."""

    def __init__(self, env: gym.Env[Obs, np.int64]) -> None:
        super().__init__(env)
        self.mask = np.ones(int(env.action_space.n), bool)  # type: ignore[attr-defined,type-var]

    def reset(self, **kw: Any) -> tuple[Obs, dict[str, Any]]:
        obs, info = self.env.reset(**kw)
        self.mask = obs["action_mask"].astype(bool)
        return obs, info

    def step(self, action: Any) -> tuple[Obs, Any, bool, bool, dict[str, Any]]:
        obs, reward, term, trunc, info = self.env.step(action)
        self.mask = obs["action_mask"].astype(bool)
        return obs, reward, term, trunc, info

    def action_masks(self) -> np.ndarray:
        return self.mask


class MasksFromObs(VecEnvWrapper):
    """MaskablePPO's masks from the last observations' `action_mask`. sb3-contrib asks every
    sub-environment for them (`env_method("action_masks")`): in a `SubprocVecEnv` a second round
    trip to every worker per step, which this spares (SB3BusVecEnv reads its masks the same way)."""

    def reset(self) -> Any:
        obs = self.venv.reset()
        self.masks = obs["action_mask"].astype(bool)
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, dones, infos = self.venv.step_wait()
        self.masks = obs["action_mask"].astype(bool)  # a finished one's is its next episode's
        return obs, rewards, dones, infos

    def env_method(self, name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        if name == "action_masks":
            return list(self.masks if indices is None else self.masks[indices])
        return self.venv.env_method(name, *args, indices=indices, **kwargs)


def local_envs(game: str, envs: int) -> list[Any]:
    """Makers of `envs` in-process environments with `action_masks()`, for SB3's vector envs."""
    return [lambda i=i: MaskFromObs(LocalEnv(game, seed=i + 1)) for i in range(envs)]


def sb3_rate(venv: VecEnv, seconds: float) -> float:
    """Learner steps per second of an SB3 vector environment (it resets a finished one within the
    same step, so every step is a learner's), random legal actions."""
    rng = np.random.default_rng(0)
    obs = venv.reset()
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        obs, *_ = venv.step(np.array([random_legal(rng, m) for m in obs["action_mask"]]))
        steps += venv.num_envs
    return steps / (time.perf_counter() - t0)


def mainstream(
    game: str, seconds: float, envs: int, steps: int | None, ppo: dict[str, Any] = PPO
) -> list[tuple[str, int, bool, float]]:
    """(4): the mainstream's cross-process environments of this game: (name, environments, whether
    MaskablePPO trained on them, steps per second)."""
    out: list[tuple[str, int, bool, float]] = []
    for n in (1, envs):
        sub = SubprocVecEnv(local_envs(game, n))
        try:
            out.append((f"SubprocVecEnv({n})", n, False, sb3_rate(sub, seconds)))
        finally:
            sub.close()
        gym_async = gym.vector.AsyncVectorEnv([partial(LocalEnv, game, seed=i + 1) for i in range(n)])
        try:
            out.append((f"AsyncVectorEnv({n})", n, False, vector_rate(gym_async, seconds)))
        finally:
            gym_async.close()
        if steps is None:
            continue
        for label, wrap in (("", False), (", masks from observations", True)):
            sub = SubprocVecEnv(local_envs(game, n))
            venv: VecEnv = MasksFromObs(sub) if wrap else sub
            try:
                rate = train(venv, steps, ppo)
                out.append((f"MaskablePPO on SubprocVecEnv({n}){label}", n, True, rate))
            finally:
                venv.close()
    return out


def train(env: gym.Env[Obs, np.int64] | VecEnv, steps: int, ppo: dict[str, Any] = PPO) -> float:
    """MaskablePPO's `learn()` steps per second on `env` with the hyperparameters `ppo`: a Gymnasium
    env (its masks from its observations), or an SB3 VecEnv (`n_steps` per sub-environment divided
    so a rollout is as long)."""
    from sb3_contrib import MaskablePPO

    # SB3's silent logger makes a folder per `learn()`, by default a new one in the system's temp
    # folder; the benchmark's runs go in one folder of its own, removed at the end.
    os.environ.setdefault("SB3_LOGDIR", _SB3_LOGS.name)
    if isinstance(env, VecEnv):
        envs = env.num_envs
    else:
        envs, env = 1, MaskFromObs(env)
    params = {**ppo, "n_steps": max(ppo["n_steps"] // envs, 8)}
    model = MaskablePPO("MultiInputPolicy", env, verbose=0, device="cpu", **params)
    t0 = time.perf_counter()
    model.learn(total_timesteps=steps)
    return model.num_timesteps / (time.perf_counter() - t0)


def train_vector(
    game: str, config: Any, run_dir: str, steps: int, envs: int, ppo: dict[str, Any] = PPO
) -> tuple[float, float]:
    """(in process, through the bus) MaskablePPO steps per second on `envs` environments at once."""
    from spielbus.env.sb3 import SB3BusVecEnv

    local = DummyVecEnv(local_envs(game, envs))
    local_rate = train(local, steps, ppo)
    bus = SB3BusVecEnv(config, num_envs=envs, run_dir=run_dir, seat=0)
    try:
        bus_rate = train(bus, steps, ppo)
    finally:
        bus.close()
    return local_rate, bus_rate


async def _floor_async(seconds: float, in_flight: int) -> float:
    import nats

    with EmbeddedNats(jetstream=False) as srv:
        code = (
            "import asyncio, sys, nats\n"
            "from bus import loop\n"
            "async def main():\n"
            "    nc = await nats.connect(sys.argv[1])\n"
            "    async def cb(m): await m.respond(m.data)\n"
            "    await nc.subscribe('echo', cb=cb)\n"
            "    await nc.flush(); print('ready', flush=True)\n"
            "    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)\n"
            "loop.run(main())\n"
        )
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            code,
            srv.url,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            cwd=str(ROOT),
        )
        assert child.stdout is not None and (await child.stdout.readline()).strip() == b"ready"
        nc = await nats.connect(srv.url)
        payload = b"x" * 600  # about a tic-tac-toe turn with its tensor
        done = 0
        end = time.perf_counter() + seconds

        async def one() -> None:
            nonlocal done
            while time.perf_counter() < end:
                await nc.request("echo", payload, timeout=30)
                done += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(in_flight)))
        rate = done / (time.perf_counter() - t0)
        await nc.close()
        assert child.stdin is not None
        child.stdin.close()
        await child.wait()
    return rate


def bound(learner_rate: float, floor_rate: float) -> float:
    """The best ratio bus / in process for a learner stepping at `learner_rate` in process when each
    bus step adds at least one round trip of the floor (`floor_rate` per second), the learner's own
    work and the round trip taking turns (SB3 steps its environments, then acts, then steps)."""
    return (1 / learner_rate) / (1 / learner_rate + 1 / floor_rate)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--games", nargs="+", default=["tic_tac_toe", "connect_four"])
    p.add_argument("--steps", type=int, default=2048, help="MaskablePPO steps per learner")
    p.add_argument("--seconds", type=float, default=6.0, help="each raw phase")
    p.add_argument("--envs", type=int, default=16)
    p.add_argument(
        "--hyperparameters",
        choices=sorted(HYPERPARAMETERS),
        default="light",
        help="MaskablePPO's: light (n_steps 256, 4 epochs; the documented runs) or sb3 (sb3-contrib's "
        "defaults: n_steps 2048, 10 epochs)",
    )
    p.add_argument("--no-train", dest="train", action="store_false", help="raw steps only, no MaskablePPO")
    p.add_argument(
        "--no-mainstream",
        dest="mainstream",
        action="store_false",
        help="leave out (4): SB3's SubprocVecEnv and Gymnasium's AsyncVectorEnv",
    )
    args = p.parse_args()
    ppo = HYPERPARAMETERS[args.hyperparameters]
    logging.basicConfig(level=logging.ERROR)
    import torch

    torch.set_num_threads(1)
    floor1 = bus_loop.run(_floor_async(args.seconds / 2, 1))
    floor_n = bus_loop.run(_floor_async(args.seconds / 2, args.envs))
    with EmbeddedNats(jetstream=False) as srv:
        raw1 = raw_floor.round_trips(srv.url, args.seconds / 2, 1)
        raw_n = raw_floor.round_trips(srv.url, args.seconds / 2, args.envs)
    print(f"load average {os.getloadavg()[0]:.1f}")
    print(
        f"floor: bare NATS request/reply {floor1:.0f}/s one at a time, "
        f"{floor_n:.0f}/s {args.envs} at a time: a bus step (one round trip) at most "
        f"{floor1:.0f} and {floor_n:.0f} steps/s"
    )
    print(
        f"independent check (benchmarks/raw_floor.py, no nats.py, no event loop): {raw1:.0f}/s one at "
        f"a time, {raw_n:.0f}/s {args.envs} at a time"
    )

    def allows(local: float, floor: float, raw: float) -> str:
        return f"(the floor allows {floor / local:.3f}; the raw floor {raw / local:.3f})"

    def allows_training(local: float, floor: float, raw: float) -> str:
        return f"(the floor allows {bound(local, floor):.2f}; the raw floor {bound(local, raw):.2f})"

    for game in args.games:
        config = parse_config(CONFIG.format(game=game))
        with tempfile.TemporaryDirectory(prefix="train_bus-") as run_dir:
            local = single_rate(LocalEnv(game), args.seconds)
            env = BusEnv(config, run_dir=run_dir, seat=0)
            try:
                one = single_rate(env, args.seconds)
                bus_train = train(env, args.steps, ppo) if args.train else None
            finally:
                env.close()
            venv = BusVectorEnv(config, num_envs=args.envs, run_dir=run_dir, seat=0)
            try:
                many = vector_rate(venv, args.seconds)
            finally:
                venv.close()
            local_train = train(LocalEnv(game), args.steps, ppo) if args.train else None
            vector_train = (
                train_vector(game, config, run_dir, args.steps, args.envs, ppo) if args.train else None
            )
        others = (
            mainstream(game, args.seconds, args.envs, args.steps if args.train else None, ppo)
            if args.mainstream
            else []
        )
        print(f"{game} (load average {os.getloadavg()[0]:.1f}):")
        print(f"  raw, in process           {local:8.0f} steps/s")
        print(
            f"  raw, BusEnv               {one:8.0f} steps/s   BusEnv / in process = {one / local:.3f} "
            + allows(local, floor1, raw1)
        )
        print(
            f"  raw, BusVectorEnv({args.envs})      {many:8.0f} steps/s   "
            f"BusVectorEnv / in process = {many / local:.3f} " + allows(local, floor_n, raw_n)
        )
        if bus_train is not None and local_train is not None:
            print(
                f"  MaskablePPO, {args.steps} steps: in process {local_train:.0f} steps/s, through BusEnv "
                f"{bus_train:.0f} steps/s   bus / in process = {bus_train / local_train:.2f} "
                + allows_training(local_train, floor1, raw1)
            )
        if vector_train is not None:
            vl, vb = vector_train
            print(
                f"  MaskablePPO, {args.steps} steps on {args.envs} environments: in process (DummyVecEnv) "
                f"{vl:.0f} steps/s, through SB3BusVecEnv {vb:.0f} steps/s   bus / in process = {vb / vl:.2f} "
                + allows_training(vl, floor_n, raw_n)
            )
        if others:
            print("  the mainstream's cross-process environments, the same ratios (4):")
        for name, n, trained, rate in others:
            # The same in-process rate each bus measure is divided by.
            base = local
            if trained and n == 1 and local_train is not None:
                base = local_train
            elif trained and vector_train is not None:
                base = vector_train[0]
            print(f"    {name:55s} {rate:8.0f} steps/s   / in process = {rate / base:.3f}")


if __name__ == "__main__":
    main()
