"""Training through the bus against training in process: environment steps per second of the learner
on tic-tac-toe against a random opponent, measured in the same run.

(a) OpenSpiel's `rl_environment.Environment` in this process: the learner (seat 0) and the opponent
    both pick a uniformly random legal action; one env step is one learner decision (the
    opponent's reply is stepped too, and not counted), as in (b);
(b) `spielbus.env.BusEnv`: the same play through the bus (the opponent a `random` agent process
    asked over NATS, the learner asked in the referee's process: spielbus/env/bridge.py; every match
    refereed and recorded, tensors in the turn), one match at a time;
(c) `spielbus.env.BusVectorEnv` with `--envs` matches at once (Gymnasium's vector API).

Prints each rate and (a)/(b), (a)/(c): how many times slower a learner's step is through the bus.

    .venv/bin/python benchmarks/env_throughput.py [--seconds 8] [--envs 8]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
import time
from typing import Any

import gymnasium as gym
import numpy as np
from open_spiel.python import rl_environment

from referee.config import parse_config
from spielbus.env import BusEnv, BusVectorEnv

CONFIG = """
name = "bench_env"
deadline_ms = 60000
[[games]]
name = "tic_tac_toe"
[agents.rand]
kind = "random"
options = { seed = 1 }
"""


def in_process(seconds: float) -> float:
    env = rl_environment.Environment("tic_tac_toe")
    rng = np.random.default_rng(0)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        ts = env.reset()
        while not ts.last():
            player = ts.observations["current_player"]
            legal = ts.observations["legal_actions"][player]
            ts = env.step([int(rng.choice(legal))])
            steps += player == 0
    return steps / (time.perf_counter() - t0)


def random_legal(rng: np.random.Generator, mask: np.ndarray) -> int:
    return int(rng.choice(np.flatnonzero(mask)))


def single_rate(env: gym.Env[Any, Any], seconds: float) -> float:
    """Learner steps per second of `env`, random legal actions (also benchmarks/train_bus.py's)."""
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    steps = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        obs, _, term, trunc, _ = env.step(random_legal(rng, obs["action_mask"]))
        steps += 1
        if term or trunc:
            obs, _ = env.reset()
    return steps / (time.perf_counter() - t0)


def vector_rate(env: gym.vector.VectorEnv[Any, Any, Any], seconds: float) -> float:
    """Learner steps per second of a vector environment that resets a finished sub-environment on
    its next step (`BusVectorEnv`; Gymnasium's own by default), random legal actions."""
    rng = np.random.default_rng(0)
    obs, _ = env.reset(seed=0)
    steps = 0
    resetting = np.zeros(env.num_envs, np.bool_)
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        # A sub-environment that just ended is reset by this step (its action is ignored, and
        # the step is not a learner's).
        actions = np.array([random_legal(rng, m) if m.any() else 0 for m in obs["action_mask"]])
        obs, _, term, trunc, _ = env.step(actions)
        steps += int(np.sum(~resetting))
        resetting = term | trunc
    return steps / (time.perf_counter() - t0)


def bus_single(run_dir: str, seconds: float) -> float:
    env = BusEnv(parse_config(CONFIG), run_dir=run_dir)
    try:
        return single_rate(env, seconds)
    finally:
        env.close()


def bus_vector(run_dir: str, seconds: float, n: int) -> float:
    env = BusVectorEnv(parse_config(CONFIG), num_envs=n, run_dir=run_dir)
    try:
        return vector_rate(env, seconds)
    finally:
        env.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--envs", type=int, default=8)
    args = p.parse_args()
    logging.basicConfig(level=logging.ERROR)
    raw = in_process(args.seconds)
    with tempfile.TemporaryDirectory(prefix="spielbus-bench-env-") as run_dir:
        one = bus_single(run_dir, args.seconds)
        many = bus_vector(run_dir, args.seconds, args.envs)
    print(f"(a) rl_environment, in process:     {raw:9.0f} learner steps/s")
    print(f"(b) BusEnv through the bus:         {one:9.0f} learner steps/s   (a)/(b) = {raw / one:.0f}x")
    print(
        f"(c) BusVectorEnv, {args.envs} matches at once: {many:6.0f} learner steps/s   "
        f"(a)/(c) = {raw / many:.0f}x"
    )


if __name__ == "__main__":
    main()
