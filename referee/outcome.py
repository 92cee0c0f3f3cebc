"""Finishing order from returns: the one rule every rating and standing uses."""

from __future__ import annotations


def ranks_from_returns(returns: list[float], eps: float = 1e-9) -> list[int]:
    """Competition ranking (1 is best; equal returns share a place): [1, -1] -> [1, 2]."""
    return [1 + sum(1 for other in returns if other > r + eps) for r in returns]
