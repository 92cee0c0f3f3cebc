"""The papers' pipelines that are not a player: code-world-model synthesis and evaluation
(`research.cwm`), self-play, the LLM Coach and its datasets (`research.coach`).

The top of the stack: a research module may import every package of ours, and none imports it
(the `spielbus cwm` and `spielbus selfplay` commands run it as `python -m research.cwm` /
`python -m research.coach`). What an agent needs at play time lives in `agents/`: the `cwm`
agent with its sandbox and model-folder reader (`agents.cwm`), the policy-table format
(`agents.policy_dataset`)."""
