"""What runs next to a code world model inside the sandbox: loading, (IS)MCTS, inference.

Pure Python on purpose (no pyspiel, no pydantic): the worker imports only this (and the search
core, `agents.tree_search`, shared with `agents.mcts_agent` and `agents.llm_mcts`), and the
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
import types
from collections.abc import Callable
from typing import Any

from agents.tree_search import search

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


def missing_api(mod: types.ModuleType, imperfect: bool, inference: str = "history") -> list[str]:
    """The API functions `mod` lacks; an imperfect-information model needs its inference function:
    `resample_history` (H.3, H.5) or, with `inference` "state", `resample_state` (H.4)."""
    names = list(API) + ([f"resample_{inference}"] if imperfect else [])
    return [n for n in names if not callable(getattr(mod, n, None))]


# ---- search ----------------------------------------------------------------------------
class ModelRules:
    """The model API as the search core's `Rules`: actions are texts, chance outcomes uniform over
    the legal chance actions, rewards gathered step by step, nodes keyed by the action history or
    (information sets) by the acting player's observation."""

    intermediate_rewards = True

    def __init__(self, m: Any, nplayers: int, information_sets: bool) -> None:
        self.m = m
        self.num_players = nplayers
        self.info_sets = information_sets
        # The model's own functions, not wrappers: a call less per step of the hot loop.
        self.player: Callable[[Any], int] = m.get_current_player
        self.apply: Callable[[Any, str], Any] = m.apply_action
        self.rewards: Callable[[Any], Any] = m.get_rewards

    def legal(self, state: Any) -> list[str]:
        return [str(a) for a in self.m.get_legal_actions(state)]

    def sample(self, state: Any, player: int, rng: random.Random) -> tuple[Any, str]:
        action = rng.choice(self.legal(state))
        return self.m.apply_action(state, action), action

    def infoset(self, state: Any, player: int) -> tuple[int, str]:
        return (player, json.dumps(self.m.get_observations(state)[player], sort_keys=True, default=str))


class RolloutEvaluator:
    """Random play to the end (at most 2000 steps), `rollouts` times: per player the mean of every
    reward after the leaf. Not the leaf's own: the search gathered those on its way in, and counting
    them again valued a win reached inside the tree twice as high as one a rollout found. No prior
    (uniform)."""

    def __init__(self, m: Any, nplayers: int, rollouts: int, rng: random.Random) -> None:
        self.m, self.nplayers, self.rollouts, self.rng = m, nplayers, rollouts, rng

    def prior(self, state: Any) -> list[tuple[Any, float]]:
        return []

    def evaluate(self, state: Any) -> list[float]:
        m, rng, rollouts = self.m, self.rng, self.rollouts
        total = [0.0] * self.nplayers
        for _ in range(rollouts):
            s = copy.deepcopy(state) if rollouts > 1 else state
            acc = [0.0] * self.nplayers
            for _step in range(2000):
                if m.get_current_player(s) == TERMINAL:
                    break
                s = m.apply_action(s, rng.choice(list(m.get_legal_actions(s))))
                for i, r in enumerate(m.get_rewards(s)):
                    acc[i] += float(r)
            for i in range(self.nplayers):
                total[i] += acc[i]
        return [x / rollouts for x in total]


class ValueFunctionEvaluator:
    """A synthesized `value_function(state, player_id)` (appendix H.7) at a non-terminal leaf;
    a terminal leaf is scored by `terminal` (its rewards). No prior (uniform)."""

    def __init__(
        self, m: Any, nplayers: int, value_fn: Callable[[Any, int], float], terminal: RolloutEvaluator
    ) -> None:
        self.m, self.nplayers, self.value_fn, self.terminal = m, nplayers, value_fn, terminal

    def prior(self, state: Any) -> list[tuple[Any, float]]:
        return []

    def evaluate(self, state: Any) -> list[float]:
        if self.m.get_current_player(state) == TERMINAL:
            return self.terminal.evaluate(state)
        return [float(self.value_fn(copy.deepcopy(state), p)) for p in range(self.nplayers)]


def mcts(
    m: Any,
    roots: list[Any],
    seat: int,
    nplayers: int,
    simulations: int,
    rollouts: int,
    uct_c: float,
    rng: random.Random,
    value_fn: Callable[[Any, int], float] | None = None,
    time_limit: float = 1e9,
    information_sets: bool = False,
) -> dict[str, Any]:
    """UCT on the model from `roots` (one state: MCTS; several determinizations: SO-ISMCTS with
    nodes keyed by the acting player's observation), the search core's loop with the model's
    rules; leaves valued by `value_fn` if given, else by random rollouts. A simulation the model
    breaks (any exception) is a failure. Returns root visit counts."""
    rules = ModelRules(m, nplayers, information_sets)
    rollout = RolloutEvaluator(m, nplayers, rollouts, rng)
    evaluator = rollout if value_fn is None else ValueFunctionEvaluator(m, nplayers, value_fn, rollout)
    out = search(
        rules,
        lambda: copy.deepcopy(rng.choice(roots)),
        evaluator,
        simulations,
        uct_c,
        rng,
        time_limit,
        catch=(Exception,),
    )
    root_key = rules.infoset(roots[0], seat) if information_sets else ()
    return {
        "visits": out.root_visits(root_key),
        "simulations": out.simulations,
        "failures": out.failures,
        "nodes": len(out.tree),
    }


def replay_texts(m: Any, initial: Any, actions: list[str]) -> Any:
    state = copy.deepcopy(initial)
    for a in actions:
        state = m.apply_action(state, a)
    return state


def replay_returns(m: Any, initial: Any, actions: list[str], nplayers: int) -> tuple[Any, list[float]]:
    """The state after `actions` and each player's rewards summed along the way (the returns, as
    OpenSpiel counts them)."""
    state = copy.deepcopy(initial)
    total = [0.0] * nplayers
    for a in actions:
        state = m.apply_action(state, a)
        for i, r in enumerate(list(m.get_rewards(state))[:nplayers]):
            total[i] += float(r)
    return state, total


def resample_actions(
    m: Any,
    initial: Any,
    history: list[list[Any]],
    seat: int,
    tries: int,
    closed_deck: bool,
    terminal: bool = False,
) -> tuple[Any, list[str]] | None:
    """Appendix H.6: up to `tries` calls of the inference function; the first history whose
    replay recreates the seat's last observation, at the seat's turn (or, with `terminal`, at the
    end of the game), gives the state and the history's actions."""
    for _ in range(tries):
        try:
            hist = copy.deepcopy(history)
            args = (hist, seat, terminal) if closed_deck else (hist, seat)
            actions = [str(a) for a in m.resample_history(*args)]
            state = replay_texts(m, initial, actions)
            want = TERMINAL if terminal else seat
            if m.get_current_player(state) == want and norm(m.get_observations(state)[seat]) == norm(
                history[-1][0]
            ):
                return state, actions
        except Exception:
            continue
    return None


def resample_state(
    m: Any, history: list[list[Any]], seat: int, tries: int, terminal: bool = False
) -> Any | None:
    """Appendix H.4 at play time: up to `tries` calls of `resample_state`; the first state that
    shows the seat its last observation, at its turn (or, with `terminal`, at the end), is kept."""
    want = TERMINAL if terminal else seat
    for _ in range(tries):
        try:
            state = m.resample_state(copy.deepcopy(history), seat)
            if m.get_current_player(state) == want and norm(m.get_observations(state)[seat]) == norm(
                history[-1][0]
            ):
                return state
        except Exception:
            continue
    return None


def resample(
    m: Any, initial: Any, history: list[list[Any]], seat: int, tries: int, closed_deck: bool
) -> Any | None:
    """A state at the seat's turn from `resample_actions`, or None."""
    found = resample_actions(m, initial, history, seat, tries, closed_deck)
    return None if found is None else found[0]
