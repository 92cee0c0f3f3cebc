"""The `cwm` agent of "Code World Models for General Game Playing" (Lehrach, Hennes,
Lázaro-Gredilla et al.): (IS)MCTS on a synthesized code world model, at play time.

Modules: sandbox (bubblewrap, seccomp, rlimits; its root built by sandbox_root, its filter by
seccomp_filter), worker and harness (what runs inside it: answers, never judges), model_dir
(reading a model folder), reference (hand-written known-good models), agent. Synthesis and
evaluation, which write model folders, are `research.cwm`. See docs/cwm.md.
"""
