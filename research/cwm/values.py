"""Value functions (section 4.3 and appendix H.7 of "Code World Models for General Game
Playing"): several candidates written by the LLM, checked in the sandbox (a finite float for
every player, the reward at terminal states), the best chosen by a round-robin tournament of
MCTS with each candidate on the synthesized model. Not refined: there is no ground truth.

"No value function" (MCTS with random rollouts, as the paper's agent plays without one) is an
entrant of the tournament too (appendix D.4: "Agents using different value functions (or
potentially no value function) compete"): a candidate is chosen only if it scores more than it
does; otherwise the model folder names none and the agent plays with rollouts.

Each candidate is checked and searches in a sandbox of its own; the tournament's games are
played and scored in this process on a sandbox that holds only the model, so a candidate can
sway neither another's check nor the score.

Limits: the tournament plays both sides on the model's full state (for imperfect-information
games too), with small searches (`simulations`), so it ranks heuristics, not inference.
"""

from __future__ import annotations

import itertools
import math
import random
import time
from dataclasses import dataclass, field
from typing import Any

from agents.cwm.harness import TERMINAL, cap
from agents.cwm.sandbox import Limits, Sandbox, SandboxError
from research.cwm import prompts as P
from research.cwm.judge import RemoteModel, short


@dataclass
class ValueCandidate:
    name: str
    code: str
    ok: bool = False
    problem: str = ""
    score: float = 0.0


NO_VALUE = "none"  # the tournament's entrant without a value function (random rollouts)


@dataclass
class ValueChoice:
    candidates: list[ValueCandidate] = field(default_factory=list)
    chosen: str | None = None  # None: no candidate beat searching without a value function
    no_value_score: float | None = None  # that entrant's score (None: it did not play)


def value_prompt(game: str, rules: str, model_code: str, states: list[dict[str, Any]]) -> str:
    player_tests = "\n".join(
        f"assert isinstance(value_function({P.py_lit(s['state'])}, {p}), float)"
        for s in states[:2]
        for p in (0, 1)
    )
    terminal = [s for s in states if s.get("terminal_rewards") is not None][:2]
    terminal_tests = "\n".join(
        f"assert value_function({P.py_lit(s['state'])}, {p}) == {s['terminal_rewards'][p]}"
        for s in terminal
        for p in (0, 1)
    )
    return P.template("value_function").format(
        game=game,
        game_description=rules,
        code=model_code,
        value_function=P.template("value_signature"),
        player_tests=player_tests,
        terminal_tests=terminal_tests,
    )


def value_problems(answers: Any, states: list[dict[str, Any]], num_players: int) -> list[str]:
    """H.7's tests, judged here on the values the sandbox returned: a finite float for every
    player at every state, the rewards at terminal states. At most five problems."""
    if not isinstance(answers, list) or len(answers) != len(states):
        return ["value_function answered a different number of states"]
    problems = []
    for s, row in zip(states, answers, strict=True):
        if not isinstance(row, list) or len(row) != num_players:
            problems.append("value_function answered a different number of players")
            continue
        for p, v in enumerate(row):
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                problems.append(f"value_function(state, {p}) returned {short(v, 80)}, not a finite float")
            elif s.get("terminal_rewards") is not None and abs(float(v) - s["terminal_rewards"][p]) > 1e-6:
                problems.append(
                    f"terminal state: value_function(state, {p}) = {v!r}, reward {s['terminal_rewards'][p]}"
                )
    return problems[:5]


def _box(model_code: str, value: ValueCandidate | None) -> Sandbox:
    """A fresh sandbox holding the model and at most one value function (a candidate never shares
    a process with another, nor with the model that keeps the tournament's score)."""
    sb = Sandbox(limits=Limits(cpu_s=300))
    sb.start()
    loaded = sb.call("load", code=model_code, name="model", timeout=10)
    if not loaded.get("ok"):
        sb.close()
        raise SandboxError("model", "the model does not load")
    if value is not None:
        loaded = sb.call("load", code=value.code, name=value.name, timeout=10)
        if not loaded.get("ok"):
            sb.close()
            raise SandboxError(str(loaded.get("error"))[:40], cap(str(loaded.get("detail")), 300))
    return sb


def check_and_rank(
    model_code: str,
    candidates: list[ValueCandidate],
    states: list[dict[str, Any]],
    initial_state: Any,
    num_players: int,
    *,
    games: int = 4,
    simulations: int = 40,
    seed: int = 0,
    no_value: bool = True,
) -> ValueChoice:
    """Check each candidate in a sandbox of its own, then a round robin among the valid ones and
    (with `no_value`) MCTS without a value function, played and scored here; the highest total
    of mean returns wins, ties going to no value function (a value function must earn its place)."""
    choice = ValueChoice(candidates=candidates)
    boxes: dict[str, Sandbox] = {}
    try:
        try:
            game = _box(model_code, None)  # the model alone: the tournament's game
        except SandboxError:
            for c in candidates:
                c.problem = "the model does not load"
            return choice
        boxes[""] = game
        for c in candidates:
            try:
                sb = _box(model_code, c)
            except SandboxError as exc:
                c.problem = f"{exc.reason}: {exc.detail}"
                continue
            boxes[c.name] = sb
            try:
                answered = sb.call(
                    "values", value=c.name, states=[s["state"] for s in states], num_players=num_players,
                    timeout=20,
                )  # fmt: skip
            except SandboxError as exc:
                c.problem = cap(str(exc), 300)
                continue
            if not answered.get("ok"):
                c.problem = f"{answered.get('error')}: {cap(str(answered.get('detail')), 300)}"
                continue
            problems = value_problems(answered.get("result"), states, num_players)
            if problems:
                c.problem = cap("; ".join(problems), 1000)
            else:
                c.ok = True
        valid = [c for c in candidates if c.ok]
        none = ValueCandidate(NO_VALUE, "", ok=True)
        entrants = ([none] if no_value and valid else []) + valid
        # The entrant without a value function searches on the model alone (`value` None: rollouts).
        seat_of: dict[str, tuple[Sandbox, str | None]] = {c.name: (boxes[c.name], c.name) for c in valid}
        seat_of[NO_VALUE] = (game, None)
        for a, b in itertools.combinations(entrants, 2):
            try:
                r = duel(game, seat_of[a.name], seat_of[b.name], initial_state, num_players,
                         games=games, simulations=simulations, seed=seed)  # fmt: skip
            except SandboxError as exc:
                a.problem = b.problem = f"tournament: {cap(str(exc), 300)}"
                break
            a.score += r
            b.score -= r
        if no_value and valid:
            choice.no_value_score = none.score
        if entrants:
            best = max(entrants, key=lambda c: c.score)  # the first of equals: no value function
            choice.chosen = None if best is none else best.name
        return choice
    finally:
        for sb in boxes.values():
            sb.close()


def duel(
    game: Sandbox,
    a: tuple[Sandbox, str | None],
    b: tuple[Sandbox, str | None],
    initial_state: Any,
    num_players: int,
    *,
    games: int,
    simulations: int,
    seed: int,
    timeout_s: float = 120.0,
) -> float:
    """MCTS with value function A against MCTS with value function B (a name None: random
    rollouts, no value function), seats alternating; each
    searches in its own sandbox from the full state (a tournament between value functions, not a
    test of inference). The game is played and scored here on the model of `game`, which holds
    no value function. Returns A's mean return (0 for a game the model could not play)."""
    rng = random.Random(seed)
    model = RemoteModel(game, time.monotonic() + timeout_s)
    total = 0.0
    for g in range(games):
        seat_a = g % num_players
        state = initial_state
        acc = [0.0] * num_players
        try:
            for _ in range(500):
                player = model.get_current_player(state)
                if player == TERMINAL:
                    break
                legal = [str(x) for x in model.get_legal_actions(state)]
                if not legal:
                    break
                action = rng.choice(legal)
                if isinstance(player, int) and player >= 0:
                    box, name = a if player == seat_a else b
                    left = model.deadline - time.monotonic()
                    reply = box.call(
                        "search", timeout=max(0.1, left), state=state, initial_state=None, actions=[],
                        seat=player, num_players=num_players, simulations=simulations, rollouts=1,
                        uct_c=1.4, seed=rng.randrange(2**31), value=name,
                    )  # fmt: skip
                    chosen = (reply.get("result") or {}).get("action") if reply.get("ok") else None
                    action = chosen if chosen in legal else action
                state = model.apply_action(state, action)
                rewards = model.get_rewards(state)
                for i in range(num_players):
                    r = float(rewards[i])
                    acc[i] += r if math.isfinite(r) else 0.0
        except SandboxError:
            raise
        except Exception:  # the model answered nonsense: this game counts nothing
            acc = [0.0] * num_players
        total += acc[seat_a]
    return total / max(1, games)
