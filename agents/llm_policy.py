"""`llm_policy`: the language model as the policy, in three modes.

- `direct`: one answer (temperature from the LLM config, 0 by default).
- `vote`: k samples at temperature 0.7, majority of the legal answers, ties
  broken at random (the LLM-MCTS paper's "vanilla LLM": k=20, T=0.7).
- `distribution`: the model writes a probability distribution over the legal
  actions, in their order, as `<action>[p1, …]</action>` (the LLM Coaching paper, appendix
  B.1); the agent samples its move from it and sends it as the move's `policy`.

`constrain` decodes only legal answers (a JSON schema: an enum of the legal
texts, or an array of exactly as many numbers); off shows the illegal-move
behaviour the papers measure. An unusable answer (empty, prose, a move not in
the list, a distribution of the wrong length or all zeros) is re-asked with the
reason up to `bad_output_retries` times, then the `fallback` plays (random legal
move or no move). A distribution that does not sum to 1 is renormalised when
`renormalize` is on, else it counts as unusable. Every case is counted in `stats`.
`shuffle_legal` (default on) lists the legal moves of direct and vote prompts in an order shuffled
per decision (`LLMStrategy.order_rng`); distribution mode keeps OpenSpiel's order (its numbers follow it).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from typing import Any, ClassVar, Literal

from pydantic import Field

from agents.base import Decision, MatchContext
from agents.llm.base import LLMError
from agents.llm.prompts import (
    choose_prompt,
    legal_texts,
    retry_prompt,
    shown_order,
    state_prompt,
    system_prompt,
)
from agents.llm.strategy import Budget, LLMStrategy, LLMStrategyOptions
from agents.llm.usage import UsageMeter
from bus.protocol import Turn


class BadOutput(LLMError):
    """The model answered, but nothing usable."""


class LLMPolicyOptions(LLMStrategyOptions):
    mode: Literal["direct", "vote", "distribution"] = "direct"
    constrain: bool = True
    k: int = Field(default=20, ge=1, description="vote: number of samples (the LLM-MCTS paper: 20).")
    vote_temperature: float = Field(
        default=0.7, ge=0.0, description="vote: sampling temperature (LLM-MCTS paper)."
    )
    bad_output_retries: int = Field(default=1, ge=0)
    renormalize: bool = True
    sum_tolerance: float = Field(default=0.01, ge=0.0)
    max_tokens: int | None = Field(default=None, description="None: the LLM config's max_tokens.")
    shuffle_legal: bool = Field(
        default=True,
        description="direct/vote: list the legal moves in an order shuffled per decision (the same in "
        "a rerun, different between matches), not OpenSpiel's: the small model answers the first "
        "listed move most of the time (docs/referee.md, 'The order of the legal moves in LLM prompts').",
    )


_NUMBER_LIST = re.compile(r"\[([^\[\]]*)\]")
_ACTION_TAG = re.compile(r"<action>(.*?)(?:</action>|$)", re.S | re.I)


def parse_distribution(text: str) -> list[float] | None:
    """The numbers of the last `[...]` inside `<action>…</action>` (or anywhere), or None."""
    tagged = _ACTION_TAG.findall(text)
    scope = tagged[-1] if tagged else text
    lists = _NUMBER_LIST.findall(scope)
    if not lists:
        return None
    try:
        values = [float(x) for x in lists[-1].replace(";", ",").split(",") if x.strip()]
    except ValueError:
        return None
    return values or None


def distribution_schema(k: int) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "number", "minimum": 0}, "minItems": k, "maxItems": k}


class LLMPolicyStrategy(LLMStrategy):
    kind = "llm_policy"
    # 2: the stable-prefix prompt layout (agents/llm/prompts.py); 3: past 40 steps the
    # history window moves 20 steps at a time, not one per turn. The version is in every record's
    # provenance, so a run recorded with other prompts shows it, split by provenance too.
    version = "3"
    Options: ClassVar[type[LLMPolicyOptions]] = LLMPolicyOptions

    def __init__(self, options: LLMPolicyOptions, client: Any = None) -> None:
        super().__init__(options, client)
        self.p: LLMPolicyOptions = options

    async def think(self, turn: Turn, ctx: MatchContext, budget: Budget, meter: UsageMeter) -> Decision:
        system = system_prompt(turn, self.rules(turn, ctx))
        if self.p.mode == "distribution":
            return await self._distribution(turn, system, budget, meter)
        choices = shown_order(legal_texts(turn), self.order_rng(turn) if self.p.shuffle_legal else None)
        messages: list[tuple[str, str]] = [("system", system), ("user", choose_prompt(turn, choices))]
        by_text = {a.text: a.id for a in turn.legal_actions}
        for _ in range(self.p.bad_output_retries + 1):
            if self.p.mode == "vote":
                result = await self.llm.chat(
                    messages,
                    choices=choices,
                    constrain=self.p.constrain,
                    n=self.p.k,
                    temperature=self.p.vote_temperature,
                    max_tokens=self.p.max_tokens,
                    deadline=budget.deadline,
                )
                legal = [c for c in result.choices if c is not None]
                meter.bad_outputs += len(result.choices) - len(legal)
                if legal:
                    counts = Counter(legal)
                    top = max(counts.values())
                    winner = self.rng.choice(sorted(c for c, v in counts.items() if v == top))
                    return Decision(action=by_text[winner], note=f"vote {top}/{self.p.k}")
            else:
                result = await self.llm.chat(
                    messages,
                    choices=choices,
                    constrain=self.p.constrain,
                    max_tokens=self.p.max_tokens,
                    deadline=budget.deadline,
                )
                if result.choice is not None:
                    return Decision(action=by_text[result.choice])
                meter.bad_outputs += 1
            # Re-ask with the reason, as LLM harnesses do; a changed prompt also misses the cache.
            retry = retry_prompt(result.text, turn, choices)
            messages = [*messages, ("assistant", result.text), ("user", retry)]
        raise BadOutput(f"{meter.bad_outputs} unusable answer(s); last: {result.text[:80]!r}")

    async def _distribution(self, turn: Turn, system: str, budget: Budget, meter: UsageMeter) -> Decision:
        k = len(turn.legal_actions)
        names = ", ".join(f"'{t}'" for t in legal_texts(turn))
        ask = (
            f"{state_prompt(turn)}\n\n"
            f"Your answer must be a probability distribution over the legal actions [{names}], "
            f"in this order, with exactly {k} numbers that sum to 1, "
            f"written as <action>[p1, p2, ...]</action>."
        )
        messages: list[tuple[str, str]] = [("system", system), ("user", ask)]
        renormalized = 0
        reason = ""
        for _ in range(self.p.bad_output_retries + 1):
            result = await self.llm.chat(
                messages,
                schema=distribution_schema(k) if self.p.constrain else None,
                max_tokens=self.p.max_tokens or max(self.llm.config.options.max_tokens, 8 * k + 8),
                deadline=budget.deadline,
            )
            probs, reason = self._check(parse_distribution(result.text), k)
            if probs is not None and reason == "renormalized":
                renormalized += 1
            if probs is not None:
                action = self.rng.choices([a.id for a in turn.legal_actions], weights=probs)[0]
                decision = Decision(action=action)
                decision.policy = {str(a.id): p for a, p in zip(turn.legal_actions, probs, strict=True)}
                if renormalized:
                    self._stat(decision, renormalized=renormalized)
                return decision
            meter.bad_outputs += 1
            retry = f"Not a valid distribution ({reason}). Answer <action>[...]</action> with {k} numbers."
            messages = [*messages, ("assistant", result.text), ("user", retry)]
        raise BadOutput(f"{meter.bad_outputs} unusable distribution(s); last: {reason}")

    def _check(self, values: list[float] | None, k: int) -> tuple[list[float] | None, str]:
        if values is None:
            return None, "no list of numbers"
        if len(values) != k:
            return None, f"{len(values)} numbers for {k} legal actions"
        if any(not math.isfinite(v) or v < 0 for v in values):
            return None, "negative or non-finite numbers"
        total = sum(values)
        if total <= 0:
            return None, "all zeros"
        if abs(total - 1.0) <= self.p.sum_tolerance:
            return [v / total for v in values], "ok"
        if not self.p.renormalize:
            return None, f"sums to {total:g}, not 1"
        return [v / total for v in values], "renormalized"
