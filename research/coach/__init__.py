"""Self-play with a coach ("LLM Coaching LLM in Self-Play Training"): the tabular CFVFP solver
(`cfvfp`), node collection (`collect`), the LLM Coach (`coach`), datasets (`dataset`), export
and the RL reward (`export`, `reward`). `python -m research.coach --help` lists the commands."""
