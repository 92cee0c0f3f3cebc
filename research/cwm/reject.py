"""Automatic rejection of bad code world models (appendix F of "Code World Models for General Game
Playing", Lehrach, Hennes, Lázaro-Gredilla et al.): several syntheses of one game (the paper
samples 5), a CWM-(IS)MCTS agent made from each, a tournament among them, and every agent worse
than the best by more than `margin` (10%) of the observed utility range rejected.

There is no true game to play on: each match is played on the model of one of its two players,
the *host*, so every ordered pair of agents (self-pairs included) meets on two hosts: with 5
models, 2 hosts x 5 agents as player 0 x 5 agents as player 1 = 50 matches, each repeated
`repeats` times (the paper: 50). An execution failure (the host's or an agent's model raises,
answers nonsense, runs out of time) or an illegal action makes both players lose: both get the
lowest return observed in the tournament's finished games.

Trust: every model runs only in a sandbox. Each agent searches in a sandbox holding its own model
(as the `cwm` agent does, through the worker's `search` op); each host's game runs in a separate
sandbox holding only that model; the games are played and scored here. Limits: two-player games
only; agents search with random rollouts (no value function); an imperfect-information agent sees
the host's observations for its seat and resamples with its own inference function.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents.cwm.harness import CHANCE, TERMINAL
from agents.cwm.model_dir import load_meta
from agents.cwm.sandbox import Limits, Sandbox, SandboxError
from research.cwm.judge import RemoteModel

MAX_STEPS = 1000
GAME_TIMEOUT_S = 120.0


@dataclass
class Entrant:
    folder: Path
    payoffs: list[float | None] = field(default_factory=list)  # None: a failed game (both lose)
    failures: int = 0
    mean: float = 0.0
    rejected: bool = False


@dataclass
class Rejection:
    entrants: list[Entrant]
    best: float = 0.0
    utility_range: float = 0.0
    threshold: float = 0.0  # means below it are rejected

    def kept(self) -> list[Path]:
        return [e.folder for e in self.entrants if not e.rejected]


def _sandbox(code: str, meta: dict[str, Any]) -> Sandbox:
    sb = Sandbox(limits=Limits(cpu_s=3600, memory_mb=2048))
    sb.start()
    loaded = sb.call("load", code=code, name="model", imperfect=meta["imperfect"],
                     inference=meta.get("inference", "history"), timeout=15)  # fmt: skip
    if not loaded.get("ok"):
        sb.close()
        raise SandboxError(str(loaded.get("error"))[:40], str(loaded.get("detail", ""))[:300])
    return sb


def play_game(
    host: Sandbox,
    host_meta: dict[str, Any],
    agents: tuple[tuple[Sandbox, dict[str, Any]], tuple[Sandbox, dict[str, Any]]],
    *,
    simulations: int,
    rng: random.Random,
) -> list[float] | None:
    """One game on the host's model, each seat's move from its agent's search; the returns, or
    None when a model failed or an agent chose an action the host does not allow."""
    model = RemoteModel(host, time.monotonic() + GAME_TIMEOUT_S)
    state = host_meta["initial_state"]
    actions: list[str] = []
    pairs: list[list[list[Any]]] = [[], []]
    total = [0.0, 0.0]
    try:
        for _ in range(MAX_STEPS):
            player = model.get_current_player(state)
            if player == TERMINAL:
                return total
            legal = [str(a) for a in model.get_legal_actions(state)]
            if not legal:
                return None
            if player == CHANCE:
                action = rng.choice(legal)
            elif player in (0, 1):
                box, meta = agents[player]
                obs = model.get_observations(state)[player]
                args: dict[str, Any] = {
                    "initial_state": meta["initial_state"], "seat": player, "num_players": 2,
                    "simulations": simulations, "rollouts": 1, "uct_c": 2.0, "seed": rng.randrange(2**31),
                    "value": None, "time_limit": 30.0,
                }  # fmt: skip
                if meta["imperfect"]:
                    args.update(history=[*pairs[player], [obs, None]], closed_deck=meta["closed_deck"],
                                determinizations=8, inference=meta.get("inference", "history"))  # fmt: skip
                else:
                    args.update(actions=list(actions), observation=obs)
                left = model.deadline - time.monotonic()
                reply = box.call("search", timeout=max(0.1, left), **args)
                result = reply.get("result") if reply.get("ok") else None
                chosen = result.get("action") if isinstance(result, dict) else None
                if not isinstance(chosen, str) or chosen not in legal:
                    return None
                action = chosen
                pairs[player].append([obs, action])
            else:
                return None
            state = model.apply_action(state, action)
            actions.append(action)
            rewards = model.get_rewards(state)
            for i in range(2):
                total[i] += float(rewards[i])
        return None
    except SandboxError:
        raise
    except Exception:  # the host answered nonsense
        return None


def reject_bad_models(
    folders: list[Path],
    *,
    repeats: int = 50,
    simulations: int = 100,
    margin: float = 0.1,
    seed: int = 0,
) -> Rejection:
    """The appendix F tournament among the model folders (of one two-player game) and its verdict:
    each entrant's mean payoff, and `rejected` where it is below the best by more than `margin` of
    the observed utility range."""
    metas = [load_meta(Path(f)) for f in folders]
    if len({m["game"] for m in metas}) != 1 or metas[0]["num_players"] != 2:
        raise ValueError("the models must be of one two-player game")
    codes = [(Path(f) / "model.py").read_text() for f in folders]
    entrants = [Entrant(Path(f)) for f in folders]
    rng = random.Random(seed)
    boxes: list[Sandbox | None] = []
    hosts: list[Sandbox | None] = []
    try:
        for code, meta in zip(codes, metas, strict=True):
            for pool in (boxes, hosts):
                try:
                    pool.append(_sandbox(code, meta))
                except SandboxError:
                    pool.append(None)  # a model that does not load fails every game it is in
        n = len(folders)
        for a in range(n):
            for b in range(n):
                for h in (a, b):
                    for _ in range(repeats):
                        box_a, box_b, host = boxes[a], boxes[b], hosts[h]
                        result: list[float] | None = None
                        if box_a is not None and box_b is not None and host is not None:
                            try:
                                result = play_game(host, metas[h], ((box_a, metas[a]), (box_b, metas[b])),
                                                   simulations=simulations, rng=rng)  # fmt: skip
                            except SandboxError:
                                result = None
                                for i, pool in ((a, boxes), (b, boxes), (h, hosts)):
                                    sb = pool[i]
                                    if sb is not None and not sb.alive:  # killed: start it again
                                        pool[i] = _restart(codes[i], metas[i])
                        for seat, who in ((0, a), (1, b)):
                            entrants[who].payoffs.append(None if result is None else result[seat])
                            entrants[who].failures += result is None
    finally:
        for sb in [*boxes, *hosts]:
            if sb is not None:
                sb.close()
    return _verdict(entrants, margin)


def _restart(code: str, meta: dict[str, Any]) -> Sandbox | None:
    try:
        return _sandbox(code, meta)
    except SandboxError:
        return None


def _verdict(entrants: list[Entrant], margin: float) -> Rejection:
    """Failed games score the lowest observed return for both players; then the means and the cut."""
    seen = [p for e in entrants for p in e.payoffs if p is not None]
    low, high = (min(seen), max(seen)) if seen else (-1.0, -1.0)
    for e in entrants:
        scores = [low if p is None else p for p in e.payoffs]
        e.mean = sum(scores) / len(scores) if scores else low
    out = Rejection(entrants, best=max(e.mean for e in entrants), utility_range=high - low)
    out.threshold = out.best - margin * out.utility_range
    for e in entrants:
        e.rejected = e.mean < out.threshold
    return out
