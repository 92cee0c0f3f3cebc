"""LLM budgets as a time control: per move and per match caps on LLM calls and tokens.

The tournament file sets them (`[budget]` for every agent, `budget` in `[agents.NAME]` for one);
the schedule copies each seat's budget into the match spec, and `MatchRunner` charges every reply
here (`BudgetMeter.charge`). A reply that takes its seat over a cap is a fault with reason
`budget`, handled by the tournament's fault policy like any other (forfeit by default).

Caps: `llm_calls`, `prompt_tokens`, `completion_tokens`, `tokens` (prompt plus completion),
`reasoning_tokens` (the thinking tokens reported, usually also inside the completion) and
`dollars` (the cost by the agent's price table); a figure no reply reported counts as 0.

Which figure is charged: the larger, field by field, of the move's `usage` (the agent's own
report) and `stats.metered` (what our LLM layer counted for the decision: `agents/llm/strategy.py`
puts it there, whatever the strategy itself reports). When the metered figure is larger the
referee charges it and records the discrepancy in the move's `stats.usage_discrepancy`.

Limits: every figure comes from the agent's process. For a stranger's bot its own report is the
only figure there is, so a budget binds it only as far as it reports honestly; for our own LLM
agents the metered figure comes from the LLM client, not from the strategy's code. A reply the
referee refuses for another reason (illegal, malformed) is still charged when it carries usage;
a timeout or a service error carries none.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from bus.protocol import Budget, BudgetLimits, MatchRecord, Move, MoveStats, TurnBudget, Usage

FIELDS = ("llm_calls", "prompt_tokens", "completion_tokens")
# Reported only where known (None otherwise): compared and charged when either side has them.
OPTIONAL_FIELDS = ("reasoning_tokens", "cost_usd", "unknown_usage_calls")


def _larger(a: float | None, b: float | None) -> Any:
    if a is None:
        return b
    return a if b is None else max(a, b)


def budget_label(budget: Budget | None) -> str:
    """A budget class name for standings: the budget's `label`, else its caps written out."""
    if budget is None:
        return "unlimited"
    if budget.label:
        return budget.label
    parts = []
    for scope, limits in (("move", budget.per_move), ("match", budget.per_match)):
        caps = [f"{k}={v}" for k, v in limits.model_dump(exclude_none=True).items()]
        if caps:
            parts.append(f"{scope}:{','.join(caps)}")
    return " ".join(parts) or "unlimited"


def metered_usage(stats: MoveStats | None) -> Usage | None:
    """The LLM layer's figure carried in `stats.metered`, or None (absent or not a valid usage)."""
    extra = (stats.__pydantic_extra__ or {}) if stats is not None else {}
    raw = extra.get("metered")
    if not isinstance(raw, dict):
        return None
    try:
        return Usage.model_validate(raw, strict=True)
    except ValidationError:
        return None


def _used(usage: Usage) -> dict[str, float]:
    """`usage` under each cap's name (`tokens`: prompt plus completion; `dollars`: the cost)."""
    return {
        "llm_calls": usage.llm_calls,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "tokens": usage.prompt_tokens + usage.completion_tokens,
        "reasoning_tokens": usage.reasoning_tokens or 0,
        "dollars": usage.cost_usd or 0.0,
    }


def _over(limits: BudgetLimits, usage: Usage) -> str | None:
    """The first cap `usage` exceeds, as `name used/cap`, or None."""
    used = _used(usage)
    for name, cap in limits.model_dump(exclude_none=True).items():
        if used[name] > cap:
            shown = f"{used[name]:.6g}" if name == "dollars" else str(used[name])
            return f"{name} {shown} > {cap}"
    return None


class BudgetMeter:
    """Per-seat spending of one match attempt, checked against the spec's budgets."""

    def __init__(self, budgets: dict[str, Budget]) -> None:
        self.budgets = budgets
        self.spent: dict[str, Usage] = {}  # what each seat with a budget has used so far

    def turn_budget(self, agent: str) -> TurnBudget | None:
        """What `agent`'s next turn says of its budget: the per-move caps, and what is left of the
        per-match caps (never below 0); None when the seat has no budget."""
        budget = self.budgets.get(agent)
        if budget is None:
            return None
        used = _used(self.spent.get(agent, Usage()))
        left = {k: max(cap - used[k], 0) for k, cap in budget.per_match.model_dump(exclude_none=True).items()}
        return TurnBudget(per_move=budget.per_move, left=BudgetLimits(**left))

    def charge(self, agent: str, move: Move) -> tuple[Usage, MoveStats | None, str | None]:
        """Charge one reply. Returns (the usage charged, the stats to record, the broken cap or None)."""
        usage, stats = move.usage, move.stats
        metered = metered_usage(stats)
        if metered is not None:
            larger = Usage(
                **{k: max(getattr(usage, k), getattr(metered, k)) for k in (*FIELDS, "cache_hits")},
                **{k: _larger(getattr(usage, k), getattr(metered, k)) for k in OPTIONAL_FIELDS},
            )
            if any(getattr(larger, k) > getattr(usage, k) for k in FIELDS) or any(
                (getattr(larger, k) or 0) > (getattr(usage, k) or 0) for k in OPTIONAL_FIELDS
            ):
                extra: dict[str, Any] = {
                    "usage_discrepancy": {"reported": usage.model_dump(), "metered": metered.model_dump()}
                }
                # An extra field of the stats (MoveStats allows them), validated like the agent's own.
                base = stats.model_dump(exclude_none=True) if stats is not None else {}
                stats = MoveStats.model_validate({**base, **extra})
            usage = larger
        budget = self.budgets.get(agent)
        if budget is None:
            # Nothing to check against: a seat without a budget keeps no running total (summing
            # two `Usage` models per move was a measurable part of a training step).
            return usage, stats, None
        total = self.spent.get(agent, Usage()) + usage
        self.spent[agent] = total
        broken = _over(budget.per_move, usage)
        if broken is not None:
            return usage, stats, f"per-move budget exceeded: {broken}"
        broken = _over(budget.per_match, total)
        if broken is not None:
            return usage, stats, f"per-match budget exceeded: {broken}"
        return usage, stats, None


def by_budget_class(records: list[MatchRecord]) -> list[MatchRecord]:
    """Copies of `records` whose seats are named `agent (class)`: standings and ratings per budget class."""
    out = []
    for rec in records:
        names = {s: f"{s} ({budget_label((rec.budgets or {}).get(s))})" for s in rec.seats}
        moves = [
            m.model_copy(update={"agent": names.get(m.agent, m.agent)}) if m.agent else m for m in rec.moves
        ]
        faults = [f.model_copy(update={"agent": names.get(f.agent, f.agent)}) for f in rec.faults]
        prov = [p.model_copy(update={"agent": names.get(p.agent, p.agent)}) for p in rec.provenance]
        out.append(
            rec.model_copy(
                update={
                    "seats": [names[s] for s in rec.seats],
                    "moves": moves,
                    "faults": faults,
                    "provenance": prov,
                }
            )
        )
    return out


def seat_budgets(
    own: Mapping[str, Budget | None], default: Budget | None, seats: list[str]
) -> dict[str, Budget]:
    """Each seat's LLM budget: its agent's own, else the file's `[budget]` (neither: unlimited)."""
    out = {}
    for s in seats:
        mine = own.get(s)
        budget = mine if mine is not None else default
        if budget is not None:
            out[s] = budget
    return out
