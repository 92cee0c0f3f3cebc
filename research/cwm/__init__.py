"""Code world models ("Code World Models for General Game Playing", Lehrach, Hennes,
Lázaro-Gredilla et al.), the pipeline: trajectories through the real referee (`record`), unit
tests from them (`trajectories`), the appendix H prompts (`prompts`), synthesis with refinement
(`synthesize`, each attempt judged by `candidate` in the sandbox of `agents.cwm.sandbox`),
value-function candidates and their tournament (`values`), the model folder written
(`model_files`), held-out accuracy (`eval`) and the commands (`cli`). The `cwm` agent that plays
on a model lives in `agents.cwm`. See docs/cwm.md.
"""
