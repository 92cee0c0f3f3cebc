"""Conventions every Spielbus service's Prometheus metrics share (referee and agents alike)."""

from __future__ import annotations

# Turn and LLM latency reaches minutes: an LLM strategy with search can think that long.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0,
)  # fmt: skip
