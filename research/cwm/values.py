"""Value functions (section 4.3 and appendix H.7 of "Code World Models for General Game
Playing"): several candidates written by the LLM, checked in the sandbox (a finite float for
every player, the reward at terminal states), the best chosen by a round-robin tournament of
MCTS with each candidate on the synthesized model. Not refined: there is no ground truth.

Limits: the tournament plays both sides on the model's full state (for imperfect-information
games too), with small searches (`simulations`), so it ranks heuristics, not inference.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any

from agents.cwm.harness import cap
from agents.cwm.sandbox import Limits, Sandbox, SandboxError
from research.cwm import prompts as P
from research.cwm.judge import short


@dataclass
class ValueCandidate:
    name: str
    code: str
    ok: bool = False
    problem: str = ""
    score: float = 0.0


@dataclass
class ValueChoice:
    candidates: list[ValueCandidate] = field(default_factory=list)
    chosen: str | None = None


def value_prompt(game: str, rules: str, model_code: str, states: list[dict[str, Any]]) -> str:
    player_tests = "\n".join(
        f"assert isinstance(value_function({P._lit(s['state'])}, {p}), float)"
        for s in states[:2]
        for p in (0, 1)
    )
    terminal = [s for s in states if s.get("terminal_rewards") is not None][:2]
    terminal_tests = "\n".join(
        f"assert value_function({P._lit(s['state'])}, {p}) == {s['terminal_rewards'][p]}"
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
) -> ValueChoice:
    """Check each candidate, then a round robin among the valid ones; the highest mean return wins."""
    choice = ValueChoice(candidates=candidates)
    sb = Sandbox(limits=Limits(cpu_s=300))
    try:
        sb.start()
        if not sb.call("load", code=model_code, name="model", timeout=10).get("ok"):
            for c in candidates:
                c.problem = "the model does not load"
            return choice
        for c in candidates:
            try:
                loaded = sb.call("load", code=c.code, name=c.name, timeout=10)
                if not loaded.get("ok"):
                    c.problem = f"{loaded.get('error')}: {str(loaded.get('detail'))[:300]}"
                    continue
                answered = sb.call(
                    "values", value=c.name, states=[s["state"] for s in states], num_players=num_players,
                    timeout=20,
                )  # fmt: skip
                if not answered.get("ok"):
                    c.problem = f"{answered.get('error')}: {cap(str(answered.get('detail')), 300)}"
                    continue
                problems = value_problems(answered.get("result"), states, num_players)
                if problems:
                    c.problem = cap("; ".join(problems), 1000)
                else:
                    c.ok = True
            except SandboxError as exc:
                c.problem = str(exc)
                sb.start()
                sb.call("load", code=model_code, name="model", timeout=10)
        valid = [c for c in candidates if c.ok]
        for a, b in itertools.combinations(valid, 2):
            try:
                r = sb.call(
                    "duel",
                    values=[a.name, b.name],
                    initial_state=initial_state,
                    num_players=num_players,
                    games=games,
                    simulations=simulations,
                    seed=seed,
                    timeout=120,
                )
            except SandboxError as exc:
                a.problem = b.problem = f"tournament: {exc}"
                break
            if r.get("ok"):
                a.score += float(r["result"])
                b.score -= float(r["result"])
        if valid:
            choice.chosen = max(valid, key=lambda c: c.score).name
        return choice
    finally:
        sb.close()
