"""Finishing order from returns, and which results count: the rules every rating and standing uses."""

from __future__ import annotations

from bus.protocol import MatchRecord


def ranks_from_returns(returns: list[float], eps: float = 1e-9) -> list[int]:
    """Competition ranking (1 is best; equal returns share a place): [1, -1] -> [1, 2]."""
    return [1 + sum(1 for other in returns if other > r + eps) for r in returns]


def provider_touched(rec: MatchRecord) -> bool:
    """Whether a provider fault touched the match's result: a `provider` fault in it (policy
    `forfeit` or `random`), or no play of it went through (outcome `void`). Voided plays before a
    clean replay do not: the replay is the match."""
    return rec.outcome == "void" or any(f.reason == "provider" for f in rec.faults)
