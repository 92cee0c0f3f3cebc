"""The least a Python referee can do per step: a check of issue 44's training goals that no arena code is in.

`raw_floor.py` measures a bare round trip; this script adds the least refereeing a step through any
bus needs, written as tightly as this author could in Python, and nothing else: no nats.py, no
event loop, no pydantic, no deadline, no events, no stored record. One process holds `--envs`
OpenSpiel games with the learner in seat 0, picking uniformly random legal actions as
`env_throughput.single_rate` does; per learner step, per game:

- the learner's action checked against the legal ids and applied;
- each opponent decision asked over nats-server through `raw_floor`'s blocking-socket client: a
  JSON turn (match, turn counter, legal ids, the action list from the start) to an opponent
  process that parses it and answers a random legal id as JSON; the answer parsed, checked (its
  match and turn, a legal id) and applied; the turns of all games written together, their answers
  read together (one round trip a step for all of them, as `BusVectorEnv` has at best);
- the action appended to the game's list (the least record there is), and the learner's
  observation built as the bus environments build it (`spielbus.env.views.Views`: mask and
  tensor); a finished game's returns kept and a new game started.

It prints learner steps per second and the ratio to the in-process environment of
`train_bus.py` (`LocalEnv`, the same spaces, the opponent a random legal move in process), measured
in the same run: the ratio any Python referee on this machine could reach, one environment and
`--envs` at once, against the goals of 0.1 and 0.3 (docs/performance.md).

    .venv/bin/python benchmarks/minimal_referee.py [--games tic_tac_toe connect_four] [--envs 1 16]
        [--seconds 5] [--steps 4096]

Limits: perfect-information games without chance nodes whose opponents move in seat 1 (the
benchmark's games); no faults, timeouts, reconnects or authentication; not a referee for anything
but this measurement.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np
import pyspiel
from env_throughput import random_legal, single_rate
from nats.aio.msg import Msg
from raw_floor import Reader, _connect, _ready
from stable_baselines3.common.vec_env import DummyVecEnv, VecEnv
from stable_baselines3.common.vec_env.base_vec_env import VecEnvStepReturn
from train_bus import LocalEnv, local_envs, train

from bus import loop as bus_loop
from bus.server import EmbeddedNats
from games.loader import initial_state, load_game, parse_spec
from games.view import is_perfect_information
from spielbus.env.views import Obs, Views

OPPONENT_SUBJECT = b"turn.opponent"


def answer(turn_bytes: bytes, rng: random.Random) -> bytes:
    """The opponent's move for one turn: a random legal id."""
    turn = json.loads(turn_bytes)
    return json.dumps(
        {"match": turn["match"], "turn": turn["turn"], "action": rng.choice(turn["legal"])}
    ).encode()


def opponent(url: str) -> None:
    """The opponent process over blocking sockets: every turn on `turn.opponent` answered."""
    sock = _connect(url)
    reader = Reader(sock)
    sock.sendall(b"SUB %s 1\r\n" % OPPONENT_SUBJECT)
    _ready(sock, reader)
    print("ready", flush=True)
    rng = random.Random(1)
    while True:
        out = []
        for reply, data in reader.messages():
            move = answer(data, rng)
            out.append(b"PUB %s %d\r\n%s\r\n" % (reply, len(move), move))
        sock.sendall(b"".join(out))


def opponent_nats(url: str) -> None:
    """The same opponent as a nats.py subscriber on our event loop (bus/loop.py)."""
    import nats

    async def main() -> None:
        nc = await nats.connect(url)
        rng = random.Random(1)

        async def on_turn(msg: Msg) -> None:
            await msg.respond(answer(msg.data, rng))

        await nc.subscribe(OPPONENT_SUBJECT.decode(), cb=on_turn)
        await nc.flush()
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)

    bus_loop.run(main())


class RawTransport:
    """Turns out and answers back through `raw_floor`'s blocking-socket client, all of a round
    written together and read together (an answer names its match)."""

    def __init__(self, url: str) -> None:
        self.sock = _connect(url)
        self.reader = Reader(self.sock)
        self.sock.sendall(b"SUB inbox.* 1\r\n")
        _ready(self.sock, self.reader)

    def ask(self, turns: list[bytes]) -> list[bytes]:
        """The answers to `turns`, in the order they came."""
        pub = b"PUB %s inbox.0 %d\r\n%s\r\n"
        self.sock.sendall(b"".join(pub % (OPPONENT_SUBJECT, len(t), t) for t in turns))
        answers: list[bytes] = []
        while len(answers) < len(turns):
            answers += [data for _, data in self.reader.messages()]
        return answers

    def close(self) -> None:
        self.sock.close()


class NatsTransport:
    """The same through nats.py requests on our event loop in a thread of its own, one hand-off to
    it a round, as a training session has (spielbus/env/session.py)."""

    def __init__(self, url: str) -> None:
        import nats

        self.loop = bus_loop.new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.nc = asyncio.run_coroutine_threadsafe(nats.connect(url), self.loop).result()

    async def _ask(self, turns: list[bytes]) -> list[bytes]:
        subject = OPPONENT_SUBJECT.decode()
        msgs = await asyncio.gather(*(self.nc.request(subject, t, timeout=30) for t in turns))
        return [m.data for m in msgs]

    def ask(self, turns: list[bytes]) -> list[bytes]:
        return asyncio.run_coroutine_threadsafe(self._ask(turns), self.loop).result()

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.nc.close(), self.loop).result()
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()


def unsupported(game: str) -> str | None:
    """Why this script cannot referee `game` (it asks seat 1 for every decision not seat 0's),
    or None."""
    try:
        loaded = load_game(parse_spec(game))
    except Exception as exc:
        return f"not a game this arena loads ({exc})"
    gt = loaded.get_type()
    if gt.chance_mode != pyspiel.GameType.ChanceMode.DETERMINISTIC:
        return "it has chance nodes, which the opponent would be asked to decide"
    if gt.dynamics != pyspiel.GameType.Dynamics.SEQUENTIAL:
        return "its moves are simultaneous"
    if not is_perfect_information(loaded):
        return "it has hidden information, which the turns here do not hide"
    if loaded.num_players() != 2:
        return "it is not a two-player game"
    return None


class Game:
    """One game the referee holds: its state, the learner's legal ids, its action list."""

    def __init__(self, game: pyspiel.Game, match: int) -> None:
        self.state = initial_state(game)
        self.match = match
        self.turn = 0
        self.actions: list[int] = []

    def apply(self, action: int) -> None:
        self.state.apply_action(action)
        self.actions.append(action)


class MinimalReferee:
    """`envs` games against the opponent process, stepped in lockstep."""

    def __init__(self, transport: RawTransport | NatsTransport, game: str, envs: int) -> None:
        self.game = load_game(parse_spec(game))
        self.views = Views(self.game)
        self.transport = transport
        self.matches = 0
        self.games = [self._new() for _ in range(envs)]
        self.finished = 0
        # This step's: whether each game ended, and the learner's return where it did.
        self.dones = np.zeros(envs, np.bool_)
        self.rewards = np.zeros(envs, np.float32)
        self._opponents(list(range(envs)))

    def _new(self) -> Game:
        self.matches += 1
        return Game(self.game, self.matches)

    def _ended(self, i: int) -> None:
        self.finished += 1
        self.dones[i] = True
        self.rewards[i] = self.games[i].state.returns()[0]
        self.games[i] = self._new()

    def _opponents(self, waiting: list[int]) -> None:
        """Ask the opponent for every game in `waiting` not at the learner's turn, until all are."""
        while waiting:
            turns, offered = [], []
            for i in waiting:
                g = self.games[i]
                g.turn += 1
                legal = g.state.legal_actions()
                offered.append(legal)  # the answer is judged against what the turn offered
                turns.append(
                    json.dumps(
                        {"match": g.match, "turn": g.turn, "legal": legal, "state": g.actions}
                    ).encode()
                )
            for i, legal, data in zip(waiting, offered, self.transport.ask(turns), strict=True):
                move = json.loads(data)
                g = self.games[i]
                action = move["action"]
                if move["match"] != g.match or move["turn"] != g.turn or action not in legal:
                    raise RuntimeError(f"match {g.match}: an illegal answer {move}")
                g.apply(action)
                if g.state.is_terminal():
                    self._ended(i)
            waiting = [i for i in waiting if self.games[i].state.current_player() != 0]

    def observe(self, i: int) -> Obs:
        state = self.games[i].state
        mask = np.zeros(self.views.num_actions, np.int8)
        mask[state.legal_actions(0)] = 1
        out = {"action_mask": mask}
        if self.views.tensor is not None:
            out["observation"] = np.asarray(getattr(state, self.views.tensor)(0), np.float32)
        return out

    def step(self, actions: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """One learner step in every game: the learner's rewards and which games ended (a new one
        started in their place)."""
        self.dones[:] = False
        self.rewards[:] = 0
        waiting = []
        for i, action in enumerate(actions):
            g = self.games[i]
            if action not in g.state.legal_actions(0):
                raise RuntimeError(f"match {g.match}: the learner's {action} is not legal")
            g.turn += 1
            g.apply(action)
            if g.state.is_terminal():
                self._ended(i)
            waiting.append(i)
        self._opponents([i for i in waiting if self.games[i].state.current_player() != 0])
        return self.rewards.copy(), self.dones.copy()


class MinimalVecEnv(VecEnv):
    """A `MinimalReferee` as an SB3 vector environment for MaskablePPO, its masks read from the
    last observations as `SB3BusVecEnv` reads them."""

    def __init__(self, ref: MinimalReferee) -> None:
        super().__init__(len(ref.games), ref.views.observation_space, ref.views.action_space)
        self.ref = ref
        self._actions: list[int] = []
        self._last: dict[str, np.ndarray] = {}

    def _obs(self) -> dict[str, np.ndarray]:
        views = [self.ref.observe(i) for i in range(self.num_envs)]
        self._last = {k: np.stack([v[k] for v in views]) for k in views[0]}
        return self._last

    def reset(self) -> dict[str, np.ndarray]:
        return self._obs()

    def step_async(self, actions: np.ndarray) -> None:
        self._actions = [int(a) for a in actions]

    def step_wait(self) -> VecEnvStepReturn:
        rewards, dones = self.ref.step(self._actions)
        return self._obs(), rewards, dones, [{} for _ in range(self.num_envs)]

    def close(self) -> None:
        pass

    def get_attr(self, attr_name: str, indices: Any = None) -> list[Any]:
        if attr_name == "render_mode":
            return [None] * self.num_envs
        if attr_name != "action_masks":
            raise AttributeError(attr_name)
        return [lambda i=i: self._last["action_mask"][i].astype(bool) for i in range(self.num_envs)]

    def set_attr(self, attr_name: str, value: Any, indices: Any = None) -> None:
        raise AttributeError(attr_name)

    def env_method(self, method_name: str, *args: Any, indices: Any = None, **kwargs: Any) -> list[Any]:
        if method_name != "action_masks":
            raise AttributeError(method_name)
        return list(self._last["action_mask"].astype(bool))

    def env_is_wrapped(self, wrapper_class: Any, indices: Any = None) -> list[bool]:
        return [False] * self.num_envs


class Opponent:
    """The opponent process and a transport to it, for as long as the `with` lasts."""

    def __init__(self, url: str, *, nats_py: bool) -> None:
        self.url, self.nats_py = url, nats_py

    def __enter__(self) -> RawTransport | NatsTransport:
        self.child = subprocess.Popen(
            [sys.executable, __file__, "--opponent-nats" if self.nats_py else "--opponent", self.url],
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,
        )
        assert self.child.stdout is not None and self.child.stdout.readline().strip() == b"ready"
        self.transport = NatsTransport(self.url) if self.nats_py else RawTransport(self.url)
        return self.transport

    def __exit__(self, *exc: object) -> None:
        try:
            self.transport.close()
        finally:
            self.child.kill()
            self.child.wait()


def rate(url: str, game: str, envs: int, seconds: float, *, nats_py: bool = False) -> tuple[float, int]:
    """Learner steps per second through a `MinimalReferee` of `envs` games, and the games finished;
    `nats_py`: both ends on nats.py and our event loop instead of blocking sockets."""
    with Opponent(url, nats_py=nats_py) as transport:
        ref = MinimalReferee(transport, game, envs)
        rng = np.random.default_rng(0)
        obs = [ref.observe(i) for i in range(envs)]
        steps = 0
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            ref.step([random_legal(rng, o["action_mask"]) for o in obs])
            obs = [ref.observe(i) for i in range(envs)]
            steps += envs
        return steps / (time.perf_counter() - t0), ref.finished


def trained(url: str, game: str, envs: int, steps: int, *, nats_py: bool = False) -> float:
    """MaskablePPO's `learn()` steps per second through a `MinimalReferee` of `envs` games
    (train_bus.py's learner and hyperparameters)."""
    with Opponent(url, nats_py=nats_py) as transport:
        return train(MinimalVecEnv(MinimalReferee(transport, game, envs)), steps)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--games",
        nargs="+",
        default=["tic_tac_toe", "connect_four"],
        help="two-player, sequential, perfect-information games without chance nodes",
    )
    p.add_argument("--envs", type=int, nargs="+", default=[1, 16], help="games at once, one line each")
    p.add_argument("--seconds", type=float, default=5.0, help="each raw phase")
    p.add_argument(
        "--steps",
        type=int,
        default=0,
        help="also train MaskablePPO (train_bus.py's learner) for this many steps on each --envs, in "
        "process and through each minimal referee, and print the ratio",
    )
    p.add_argument("--opponent", metavar="URL", help=argparse.SUPPRESS)
    p.add_argument("--opponent-nats", metavar="URL", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.opponent:
        opponent(args.opponent)
        return
    if args.opponent_nats:
        opponent_nats(args.opponent_nats)
        return
    if min(args.envs) < 1 or not args.seconds > 0 or args.steps < 0:
        p.error("--envs must be at least 1, --seconds above 0, --steps at least 0")
    for game in args.games:
        problem = unsupported(game)
        if problem:
            p.error(f"{game}: {problem}")
    if args.steps:
        import torch

        torch.set_num_threads(1)  # as train_bus.py: with one thread per core both learners crawl
    with EmbeddedNats(jetstream=False) as srv:
        for game in args.games:
            local = single_rate(LocalEnv(game), args.seconds)
            print(f"{game} (load average {os.getloadavg()[0]:.1f}): in process {local:8.0f} steps/s")
            for n in args.envs:
                in_process = None
                if args.steps:
                    learner = LocalEnv(game) if n == 1 else DummyVecEnv(local_envs(game, n))
                    in_process = train(learner, args.steps)
                    print(f"  MaskablePPO in process, {n:2d} at once {in_process:8.0f} steps/s")
                for nats_py in (False, True):
                    how = "nats.py, event loop " if nats_py else "blocking sockets    "
                    r, finished = rate(srv.url, game, n, args.seconds, nats_py=nats_py)
                    print(
                        f"  minimal referee, {how} {n:2d} at once {r:8.0f} steps/s   "
                        f"/ in process = {r / local:.3f}   ({finished} games finished)"
                    )
                    if in_process is not None:
                        through = trained(srv.url, game, n, args.steps, nats_py=nats_py)
                        print(
                            f"    MaskablePPO through it {through:8.0f} steps/s   / in process = "
                            f"{through / in_process:.2f}"
                        )


if __name__ == "__main__":
    main()
