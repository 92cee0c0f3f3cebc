"""What runs next to a code world model inside the sandbox: loading, unit tests, (IS)MCTS.

Pure Python on purpose (no pyspiel, no pydantic): the worker imports only this (and its UCT
selection step, `agents.uct`, shared with `agents.mcts_agent`), and the
benchmark runs the very same functions without the sandbox for its baseline.

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
import errno
import io
import json
import random
import time
import traceback
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


class _CappedOut(io.TextIOBase):
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


def short(value: Any, n: int = 600) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= n else text[:n] + "…"


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


# ---- unit tests ------------------------------------------------------------------------
def _check(what: str, expected: Any, actual: Any) -> None:
    if norm(expected) != norm(actual):
        raise AssertionError(f"{what}: expected {short(expected)}, got {short(actual)}")


def _transition(m: Any, t: dict[str, Any]) -> None:
    state = t["state"]
    exp = t["expect"]
    _check("get_current_player(state)", exp["current_player"], m.get_current_player(copy.deepcopy(state)))
    _check("get_rewards(state)", exp["rewards"], m.get_rewards(copy.deepcopy(state)))
    if exp.get("observations") is not None:
        _check("get_observations(state)", exp["observations"], m.get_observations(copy.deepcopy(state)))
    if exp["current_player"] != TERMINAL:
        legal = m.get_legal_actions(copy.deepcopy(state))
        if not isinstance(legal, list | tuple | set):
            raise AssertionError(f"get_legal_actions(state) returned {type(legal).__name__}, not a list")
        got = sorted(map(str, legal))
        want = sorted(exp["legal_actions"])
        illegal = sorted(set(got) - set(want))
        if illegal:
            raise AssertionError(
                f"get_legal_actions(state) returned illegal actions {short(illegal)}; legal: {short(want)}"
            )
        _check("set(get_legal_actions(state))", want, got)
    if t.get("action") is not None:
        _check(
            f"apply_action(state, {t['action']!r})",
            t["next_state"],
            m.apply_action(copy.deepcopy(state), t["action"]),
        )


def _inference(m: Any, t: dict[str, Any]) -> None:
    """Appendix H.3 (open deck) / H.5 (closed deck, `last_is_terminal` given)."""
    history = t["obs_action_history"]
    pid = t["player_id"]
    state = copy.deepcopy(t["initial_state"])
    args = (
        (copy.deepcopy(history), pid)
        if t.get("last_is_terminal") is None
        else (copy.deepcopy(history), pid, t["last_is_terminal"])
    )
    actions = m.resample_history(*args)
    it = iter(history)
    obs, act = next(it)
    done = False
    for action in list(actions)[:10000]:
        if done:
            raise AssertionError("resample_history returned actions past the last observation")
        if m.get_current_player(state) == pid:
            _check(f"recreated observation of player {pid}", obs, m.get_observations(state)[pid])
            _check(f"player {pid}'s action", act, action)
            try:
                obs, act = next(it)
            except StopIteration:
                done = True
        state = m.apply_action(state, action)
    if not done:
        try:
            next(it)
        except StopIteration:
            pass
        else:
            raise AssertionError("Failed to iterate through all observations.")
        # The last observation is the current one (no action yet): it must be reproduced.
        if t.get("last_is_terminal"):
            _check("terminal state reached", TERMINAL, m.get_current_player(state))
        else:
            _check("current player after the resampled history", pid, m.get_current_player(state))
        _check(f"recreated last observation of player {pid}", obs, m.get_observations(state)[pid])


def _random_play(m: Any, t: dict[str, Any]) -> None:
    """Appendix H.5: random play runs without error and ends."""
    state = copy.deepcopy(t["initial_state"])
    rng = random.Random(t["seed"])
    for _ in range(1000):
        player = m.get_current_player(state)
        rewards = m.get_rewards(state)
        if len(rewards) != t["num_players"]:
            raise AssertionError(f"get_rewards returned {len(rewards)} values, expected {t['num_players']}")
        if player == TERMINAL:
            return
        if player >= 0:
            m.get_observations(state)[player]
        elif player != CHANCE:
            raise AssertionError(f"get_current_player returned {player}")
        legal = list(m.get_legal_actions(state))
        if not legal:
            raise AssertionError("no legal actions in a non-terminal state")
        state = m.apply_action(state, rng.choice(legal))
    raise AssertionError("Game did not end after 1000 steps.")


RUNNERS = {"transition": _transition, "inference": _inference, "random_play": _random_play}


def run_tests(m: Any, tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each test: {"ok": bool, "message": failure text with the last printed lines}."""
    results = []
    import contextlib

    for t in tests:
        out = _CappedOut()
        try:
            with contextlib.redirect_stdout(out):
                RUNNERS[t["kind"]](m, t)
            results.append({"id": t["id"], "kind": t["kind"], "ok": True})
        except OutputLimit as exc:
            results.append({"id": t["id"], "kind": t["kind"], "ok": False, "message": f"output limit: {exc}"})
        except MemoryError:
            results.append(
                {"id": t["id"], "kind": t["kind"], "ok": False, "message": "memory limit: MemoryError"}
            )
        except Exception as exc:
            if isinstance(exc, OSError) and exc.errno == errno.EFBIG:  # RLIMIT_FSIZE; SIGXFSZ is ignored
                results.append(
                    {"id": t["id"], "kind": t["kind"], "ok": False, "message": "output limit: file size"}
                )
                continue
            tb = traceback.format_exc(limit=-6)
            if isinstance(exc, AssertionError):
                tb = f"AssertionError: {exc}"
            lines = out.tail.splitlines()[-10:]
            printed = ("\nLast printed lines:\n" + "\n".join(lines)) if lines else ""
            results.append({"id": t["id"], "kind": t["kind"], "ok": False, "message": tb[-3000:] + printed})
    return results


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
