"""What runs next to a code world model inside the sandbox: loading, (IS)MCTS, inference.

Pure Python on purpose (no pyspiel, no pydantic): the worker imports only this (and its UCT
selection step, `agents.uct`, shared with `agents.mcts_agent`), and the
benchmark runs the very same functions without the sandbox for its baseline. Nothing here
judges a model: the unit tests (expected answers, pass counting) are `research.cwm.judge`,
which runs outside the sandbox and calls the model's functions through the worker.

The model API is the one of "Code World Models for General Game Playing" (Lehrach,
Hennes, Lázaro-Gredilla et al., appendix H.2): states are JSON dicts, actions are the
game's action texts, and the module defines `apply_action`, `get_current_player`
(-1 chance, -4 terminal), `get_rewards`, `get_legal_actions`, `get_observations`, and for
imperfect-information games `resample_history` (H.3 / H.5). A value function module
defines `value_function(state, player_id) -> float` (H.7). Chance outcomes are taken as
uniform over the legal chance actions (the API has no chance distribution).
"""

from __future__ import annotations

import copy
import io
import json
import random
import time
import types
from typing import Any

from agents.uct import uct_select

API = ("apply_action", "get_current_player", "get_rewards", "get_legal_actions", "get_observations")
CHANCE = -1
TERMINAL = -4
OUTPUT_CAP = 256 * 1024  # characters a test may print before it is stopped


class OutputLimit(BaseException):
    """Printing past OUTPUT_CAP during a test (BaseException: model code cannot swallow it
    with `except Exception`)."""


class CappedOut(io.TextIOBase):
    def __init__(self) -> None:
        self.total = 0
        self.tail = ""

    def write(self, s: str) -> int:
        self.total += len(s)
        if self.total > OUTPUT_CAP:
            raise OutputLimit(f"printed more than {OUTPUT_CAP} characters")
        self.tail = (self.tail + s)[-4000:]
        return len(s)


def norm(value: Any) -> Any:
    """JSON-normal form (tuples become lists, keys strings) so that equality is the test's."""
    return json.loads(json.dumps(value, default=str))


def cap(text: str, n: int) -> str:
    """At most about `n` characters of `text`: its head and its tail, the cut said in between
    (a traceback's head says where, its tail what)."""
    if len(text) <= n:
        return text
    half = max(1, n // 2 - 20)
    return f"{text[:half]} …[{len(text) - 2 * half} characters cut]… {text[-half:]}"


def load_module(name: str, code: str, base: dict[str, Any] | None = None) -> types.ModuleType:
    """Execute `code` as module `name` (its globals start from `base`, e.g. the model's)."""
    mod = types.ModuleType(name)
    if base:
        mod.__dict__.update({k: v for k, v in base.items() if not k.startswith("__")})
    mod.__dict__["__name__"] = name
    exec(compile(code, f"{name}.py", "exec"), mod.__dict__)
    return mod


def missing_api(mod: types.ModuleType, imperfect: bool) -> list[str]:
    names = list(API) + (["resample_history"] if imperfect else [])
    return [n for n in names if not callable(getattr(mod, n, None))]


# ---- search ---------------------------------------------------------------------------
class Node:
    __slots__ = ("avail", "children", "value", "visits")

    def __init__(self) -> None:
        self.visits: dict[str, int] = {}
        self.value: dict[str, float] = {}
        self.avail: dict[str, int] = {}


def _evaluate(
    m: Any, state: Any, nplayers: int, rollouts: int, value_fn: Any, rng: random.Random
) -> list[float]:
    if value_fn is not None and m.get_current_player(state) != TERMINAL:
        return [float(value_fn(copy.deepcopy(state), p)) for p in range(nplayers)]
    total = [0.0] * nplayers
    for _ in range(rollouts):
        s = copy.deepcopy(state) if rollouts > 1 else state
        acc = [float(r) for r in m.get_rewards(s)]
        for _step in range(2000):
            if m.get_current_player(s) == TERMINAL:
                break
            s = m.apply_action(s, rng.choice(list(m.get_legal_actions(s))))
            for i, r in enumerate(m.get_rewards(s)):
                acc[i] += float(r)
        for i in range(nplayers):
            total[i] += acc[i]
    return [x / rollouts for x in total]


def mcts(
    m: Any,
    roots: list[Any],
    seat: int,
    nplayers: int,
    simulations: int,
    rollouts: int,
    uct_c: float,
    rng: random.Random,
    value_fn: Any = None,
    time_limit: float = 1e9,
    information_sets: bool = False,
) -> dict[str, Any]:
    """UCT on the model from `roots` (one state: MCTS; several determinizations: SO-ISMCTS with
    nodes keyed by the acting player's observation). Returns root visit counts."""
    tree: dict[Any, Node] = {}
    end = time.monotonic() + time_limit
    done = failures = 0
    for _ in range(simulations):
        if time.monotonic() > end:
            break
        state = copy.deepcopy(rng.choice(roots))
        path: list[tuple[Node, str, int]] = []
        key: Any = ()
        expanded = False
        returns = [0.0] * nplayers
        try:
            while True:
                player = m.get_current_player(state)
                if player == TERMINAL:
                    break
                legal = [str(a) for a in m.get_legal_actions(state)]
                if player == CHANCE:
                    action = rng.choice(legal)
                    key = (*key, action) if not information_sets else key
                    state = m.apply_action(state, action)
                    _add(returns, m.get_rewards(state))
                    continue
                if information_sets:
                    key = (player, json.dumps(m.get_observations(state)[player], sort_keys=True, default=str))
                node = tree.get(key)
                if node is None:
                    if expanded:
                        break
                    node = tree[key] = Node()
                    expanded = True
                for a in legal:
                    node.avail[a] = node.avail.get(a, 0) + 1
                action = uct_select(legal, node.visits, node.value, node.avail, uct_c, rng)
                path.append((node, action, player))
                if not information_sets:
                    key = (*key, action)
                state = m.apply_action(state, action)
                _add(returns, m.get_rewards(state))
            leaf = _evaluate(m, state, nplayers, rollouts, value_fn, rng)
        except Exception:
            failures += 1
            if failures > max(10, simulations // 2):
                break
            continue
        for node, action, player in path:
            node.visits[action] = node.visits.get(action, 0) + 1
            node.value[action] = node.value.get(action, 0.0) + returns[player] + leaf[player]
        done += 1
    root_key: Any = ()
    if information_sets:
        root_key = (seat, json.dumps(m.get_observations(roots[0])[seat], sort_keys=True, default=str))
    root = tree.get(root_key)
    visits = dict(root.visits) if root else {}
    return {"visits": visits, "simulations": done, "failures": failures, "nodes": len(tree)}


def _add(acc: list[float], rewards: Any) -> None:
    for i, r in enumerate(list(rewards)[: len(acc)]):
        acc[i] += float(r)


def replay_texts(m: Any, initial: Any, actions: list[str]) -> Any:
    state = copy.deepcopy(initial)
    for a in actions:
        state = m.apply_action(state, a)
    return state


def resample(
    m: Any, initial: Any, history: list[list[Any]], seat: int, tries: int, closed_deck: bool
) -> Any | None:
    """Appendix H.6: up to `tries` calls of the inference function; the first history whose
    replay recreates the seat's current observation gives the state."""
    for _ in range(tries):
        try:
            args = (copy.deepcopy(history), seat, False) if closed_deck else (copy.deepcopy(history), seat)
            actions = m.resample_history(*args)
            state = replay_texts(m, initial, [str(a) for a in actions])
            if m.get_current_player(state) == seat and norm(m.get_observations(state)[seat]) == norm(
                history[-1][0]
            ):
                return state
        except Exception:
            continue
    return None
