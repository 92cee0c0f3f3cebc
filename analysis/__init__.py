"""Move quality: every move of a match judged by a reference that is not a player.

`analysis.match` picks the reference per game (Stockfish for chess, an exact solver for small
perfect-information games, the CFR+ equilibrium for Kuhn and Leduc poker, an MCTS estimate
elsewhere); `analysis.scale` is the row and the scale losses are judged on; `analysis.summary`
the per-agent figures. Depends on `bus` and `games` only (tests/test_layering.py).
"""
