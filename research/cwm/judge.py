"""The judge of a candidate model: the unit tests of "Code World Models for General Game Playing"
(appendix H), run in the trusted process against a model that lives in the sandbox.

The sandboxed worker only answers calls of the model's functions (`RemoteModel`: one request
per call, the caller's arguments in, the model's return value out); the expected answers, the
comparison, the pass count and the failure messages stay here, so nothing the model's code does
inside (patching its harness, importing anything, reading its own process) can change a score.
What the model sees is what any caller would show it: the inputs of the calls made so far.

Tests: `transition` (one recorded step: player, rewards, observations, legal actions, next
state), `inference` (H.3 open deck / H.5 closed deck: `resample_history` must recreate the
seat's observations and actions; its history must be possible in the true game, chance
outcomes included; at a closed-deck terminal observation the model's reward for the seat must
be the true game's return of that history), `random_play` (H.5: random play runs and ends). Failure text
(the model's traceback and printed lines included) is capped at `MESSAGE_CAP` characters.

Limits: states cross the pipe as JSON (tuples become lists, keys strings), as the API states
them; a process failure (timeout, CPU, memory, crash) ends the whole run (`SandboxError`).
"""

from __future__ import annotations

import copy
import json
import random
import time
from typing import Any

from agents.cwm.harness import CHANCE, TERMINAL, cap, norm
from agents.cwm.sandbox import Sandbox, SandboxError
from games.loader import initial_state, load_game
from games.view import action_text

MESSAGE_CAP = 3000  # characters of one failure message (it goes into prompts and reports)
PRINTED_CAP = 1000


class ModelFailed(Exception):
    """The model's function raised, ran out of memory or printed too much: `message` says so."""


def short(value: Any, n: int = 600) -> str:
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= n else text[:n] + "…"


class RemoteModel:
    """The model API (H.2) as calls into the sandbox; `deadline` (monotonic) bounds them all."""

    def __init__(self, sandbox: Sandbox, deadline: float) -> None:
        self.sandbox = sandbox
        self.deadline = deadline
        self.fresh = True

    def call(self, fn: str, *args: Any) -> Any:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise SandboxError("timeout", "the tests ran out of time")
        reply = self.sandbox.call("api", timeout=left, fn=fn, args=list(args), fresh=self.fresh)
        self.fresh = False
        if reply.get("ok") is True:
            return reply.get("result"), str(reply.get("type", ""))
        error, detail = (
            str(reply.get("error")),
            cap(str(reply.get("detail", "")), MESSAGE_CAP - PRINTED_CAP - 50),
        )
        if error == "output":
            raise ModelFailed(f"output limit: {cap(detail, 300)}")
        if error == "memory":
            raise ModelFailed("memory limit: MemoryError")
        lines = str(reply.get("printed", ""))[-PRINTED_CAP:].splitlines()[-10:]
        printed = ("\nLast printed lines:\n" + "\n".join(lines)) if lines else ""
        raise ModelFailed(detail + printed)

    def apply_action(self, state: Any, action: Any) -> Any:
        return self.call("apply_action", state, action)[0]

    def get_current_player(self, state: Any) -> Any:
        return self.call("get_current_player", state)[0]

    def get_rewards(self, state: Any) -> Any:
        return self.call("get_rewards", state)[0]

    def get_observations(self, state: Any) -> Any:
        return self.call("get_observations", state)[0]

    def get_legal_actions(self, state: Any) -> list[Any]:
        result, kind = self.call("get_legal_actions", state)
        if kind not in ("list", "tuple", "set", "frozenset") or not isinstance(result, list):
            raise AssertionError(
                f"get_legal_actions(state) returned {kind or type(result).__name__}, not a list"
            )
        return result

    def resample_state(self, history: Any, player_id: int) -> Any:
        result, _ = self.call("resample_state", history, player_id)
        return result

    def resample_history(self, *args: Any) -> list[Any]:
        result, kind = self.call("resample_history", *args)
        if not isinstance(result, list):
            raise AssertionError(f"resample_history returned {kind or type(result).__name__}, not a list")
        return result


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


class TrueGame:
    """The true game (OpenSpiel), replaying a resampled history action text by action text: every
    action, chance outcomes included, must be legal at its step. Simultaneous-move steps are not
    checked (a joint action has no single text)."""

    def __init__(self, spec: str) -> None:
        self.state = initial_state(load_game(spec))
        self.checking = True

    def step(self, k: int, text: str) -> None:
        st = self.state
        if not self.checking:
            return
        if st.is_simultaneous_node():
            self.checking = False
            return
        if st.is_terminal():
            raise AssertionError(
                f"resample_history: action {k} ({short(text, 80)}) comes after the end of the game"
            )
        player = st.current_player()
        ids = [a for a, _ in st.chance_outcomes()] if st.is_chance_node() else st.legal_actions()
        texts = [action_text(st, player, a) for a in ids]
        if text not in texts:
            what = "chance outcome" if st.is_chance_node() else f"action of player {player}"
            raise AssertionError(
                f"resample_history: {what} {k} ({short(text, 80)}) is impossible in the true game at that "
                f"step (possible: {short(texts, 300)})"
            )
        st.apply_action(ids[texts.index(text)])


def _state_inference(m: Any, t: dict[str, Any]) -> None:
    """Appendix H.4: `resample_state` must give a state that shows the seat its last observation;
    also (beyond H.4's unit test, since the agent searches from it) at the seat's turn. A state is
    not a history: nothing here can replay it on the true game."""
    history = t["obs_action_history"]
    pid = t["player_id"]
    state = m.resample_state(copy.deepcopy(history), pid)
    _check(f"get_observations(resample_state(...))[{pid}]", history[-1][0], m.get_observations(state)[pid])
    _check("get_current_player(resample_state(...))", pid, m.get_current_player(state))


def _inference(m: Any, t: dict[str, Any]) -> None:
    """Appendix H.3 (open deck) / H.5 (closed deck, `last_is_terminal` given); with `game`, the
    resampled history is also replayed on the true game, and at a terminal observation the
    model's reward for the seat must be the true game's return of that history. A test with
    `inference` "state" is H.4's instead (`_state_inference`)."""
    if t.get("inference") == "state":
        _state_inference(m, t)
        return
    history = t["obs_action_history"]
    pid = t["player_id"]
    state = copy.deepcopy(t["initial_state"])
    true = TrueGame(t["game"]) if t.get("game") else None
    args = (
        (copy.deepcopy(history), pid)
        if t.get("last_is_terminal") is None
        else (copy.deepcopy(history), pid, t["last_is_terminal"])
    )
    actions = m.resample_history(*args)
    it = iter(history)
    obs, act = next(it)
    done = False
    for k, action in enumerate(list(actions)[:10000]):
        if done:
            raise AssertionError("resample_history returned actions past the last observation")
        if m.get_current_player(state) == pid:
            _check(f"recreated observation of player {pid}", obs, m.get_observations(state)[pid])
            _check(f"player {pid}'s action", act, action)
            try:
                obs, act = next(it)
            except StopIteration:
                done = True
        if true is not None:
            true.step(k, str(action))
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
        if t.get("last_is_terminal") and true is not None and true.checking and true.state.is_terminal():
            want = float(true.state.returns()[pid])
            got = m.get_rewards(state)[pid]
            if isinstance(got, bool) or not isinstance(got, int | float) or abs(float(got) - want) > 1e-6:
                raise AssertionError(
                    f"get_rewards(terminal state)[{pid}]: expected {want} (the true game's return of the "
                    f"resampled history), got {short(got, 80)}"
                )


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


def run_tests(m: RemoteModel, tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each test: {"id", "kind", "ok": bool, "message": failure text}. A process failure of the
    sandbox (`SandboxError`) is not a test's failure: it propagates."""
    results = []
    for t in tests:
        m.fresh = True  # the printed lines of a failure are this test's
        try:
            RUNNERS[t["kind"]](m, t)
            results.append({"id": t["id"], "kind": t["kind"], "ok": True})
        except SandboxError:
            raise
        except Exception as exc:  # AssertionError, ModelFailed, or an answer of the wrong shape
            message = str(exc) if isinstance(exc, ModelFailed) else f"{type(exc).__name__}: {exc}"
            results.append(
                {"id": t["id"], "kind": t["kind"], "ok": False, "message": cap(message, MESSAGE_CAP)}
            )
    return results
