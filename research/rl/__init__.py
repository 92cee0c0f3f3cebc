"""Reinforcement learning through the bus (spielbus.env): worked examples that train, evaluate and
deploy a learner as an ordinary agent kind (docs/env.md)."""
