"""`python -m research.rl`: the Q-learning worked example (research/rl/q_learning.py)."""

from research.rl.q_learning import main

if __name__ == "__main__":
    raise SystemExit(main())
