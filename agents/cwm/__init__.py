"""Code world models ("Code World Models for General Game Playing", Lehrach, Hennes,
Lázaro-Gredilla et al.): an LLM writes a game as Python code, refined against unit tests
from recorded trajectories inside a sandbox; the `cwm` agent plays (IS)MCTS on it.

Modules: sandbox (bubblewrap + rlimits), worker and harness (what runs inside), trajectories
(recording and unit tests), prompts (appendix H templates), synthesize (refinement), values
(value-function tournament), model_dir, eval, agent, cli. See docs/cwm.md.
"""
