"""The RL reward of "LLM Coaching LLM in Self-Play Training" (eq. 15), importable by any trainer.

    R(omega, I, omega*) = - sum over legal a of  w_a * |omega(I, a) - omega*(I, a)|

`omega` is the distribution the policy LLM wrote (parsed from its answer, in the order of the
legal actions), `omega*` the reference (the LLM Coach's or CFVFP's). Weights w follow the
paper's appendix C for Texas Hold'em: [3, 3, 5, 10] when Fold, Call, Raise and Allin are all
legal, [3, 5, 7] for Call, Raise, Allin, [7, 7] for Fold, Call; other Hold'em sets (which the
paper does not list) take the four-action weights of their actions; other games weigh every
action 1. An answer that is no valid distribution gets `invalid_reward` (below any valid one:
the largest possible distance is 2 * max(w)).

Nothing here imports a trainer. TRL's `GRPOTrainer(reward_funcs=[trl_reward])` passes the
dataset's extra columns (`reference`, `legal_actions`) as keyword arguments; verl calls
`compute_score(data_source, solution_str, ground_truth, extra_info)`. See docs/coach.md.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

HOLDEM_FOUR = {"Fold": 3.0, "Call": 3.0, "Raise": 5.0, "Allin": 10.0}
HOLDEM_SETS = {
    ("Fold", "Call", "Raise", "Allin"): [3.0, 3.0, 5.0, 10.0],
    ("Call", "Raise", "Allin"): [3.0, 5.0, 7.0],
    ("Fold", "Call"): [7.0, 7.0],
}
SUM_TOLERANCE = 0.01

_NUMBER_LIST = re.compile(r"\[([^\[\]]*)\]")
_ACTION_TAG = re.compile(r"<action>(.*?)(?:</action>|$)", re.S | re.I)


def weights(legal_texts: Sequence[str]) -> list[float]:
    key = tuple(legal_texts)
    if key in HOLDEM_SETS:
        return list(HOLDEM_SETS[key])
    if all(t in HOLDEM_FOUR for t in key):
        return [HOLDEM_FOUR[t] for t in key]
    return [1.0] * len(key)


def invalid_reward(legal_texts: Sequence[str]) -> float:
    return -2.0 * max(weights(legal_texts)) - 1.0


def parse_policy(text: str, k: int, tolerance: float = SUM_TOLERANCE) -> list[float] | None:
    """The distribution in an answer (`<action>[...]</action>` or the last `[...]`), or None when it
    is not exactly k finite non-negative numbers summing to 1 within `tolerance`."""
    tagged = _ACTION_TAG.findall(text)
    scope = tagged[-1] if tagged else text
    lists = _NUMBER_LIST.findall(scope)
    if not lists:
        return None
    try:
        values = [float(x) for x in lists[-1].split(",") if x.strip()]
    except ValueError:
        return None
    if len(values) != k or any(not math.isfinite(v) or v < 0 for v in values):
        return None
    if abs(sum(values) - 1.0) > tolerance:
        return None
    return values


def reward(policy: Sequence[float], reference: Sequence[float], legal_texts: Sequence[str]) -> float:
    """Eq. 15 for an already parsed distribution."""
    w = weights(legal_texts)
    if len(policy) != len(reference) or len(policy) != len(w):
        raise ValueError("policy, reference and legal actions differ in length")
    return -sum(wa * abs(p - q) for wa, p, q in zip(w, policy, reference, strict=True))


def score_text(answer: str, reference: Sequence[float], legal_texts: Sequence[str]) -> float:
    """Eq. 15 for an LLM's raw answer; `invalid_reward` when it holds no valid distribution."""
    policy = parse_policy(answer, len(reference))
    if policy is None:
        return invalid_reward(legal_texts)
    return reward(policy, reference, legal_texts)


def _completion_text(completion: Any) -> str:
    # TRL passes strings for plain prompts, lists of chat messages for conversational ones.
    if isinstance(completion, list):
        return "".join(str(m.get("content", "")) for m in completion if isinstance(m, dict))
    return str(completion)


def trl_reward(
    completions: list[Any], reference: list[list[float]], legal_actions: list[list[str]], **kwargs: Any
) -> list[float]:
    """A TRL GRPOTrainer reward function: one score per completion."""
    return [
        score_text(_completion_text(c), ref, legal)
        for c, ref, legal in zip(completions, reference, legal_actions, strict=True)
    ]


def compute_score(
    data_source: str, solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None
) -> float:
    """A verl custom reward function (`custom_reward_function.name=compute_score`).

    `ground_truth` is the export's `reward_model.ground_truth`: `{"reference": [...], "legal_actions": [...]}`
    (a JSON string is accepted too)."""
    truth = json.loads(ground_truth) if isinstance(ground_truth, str) else ground_truth
    return score_text(solution_str, truth["reference"], truth["legal_actions"])
