"""`spielbus selfplay export`: the dataset as prompt/reference pairs for an RL trainer (JSON Lines).

Sources: `coach` (coached.jsonl: the LLM Coach's policies, the paper's D_coach, eq. 14) or
`reference` (nodes.jsonl: the CFVFP references, D_CFVFP, eq. 11). Formats:

- `jsonl`: `{id, game, prompt, reference, legal_actions, weights}`;
- `trl`: TRL's conversational prompt (`prompt` = a list with one user message) plus the
  `reference` and `legal_actions` columns that `research.coach.reward.trl_reward` reads;
- `verl`: verl's RL row (`data_source`, `prompt` messages, `ability`, `reward_model` with the
  rule-style `ground_truth`, `extra_info`), for `research.coach.reward.compute_score`. verl reads
  parquet: `pandas.read_json(FILE, lines=True).to_parquet(...)` (pandas is not our dependency).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import agents.policy_dataset as ds
from research.coach.reward import weights


def _rows(folder: Path, source: str) -> list[tuple[ds.Node, list[float]]]:
    if source == "coach":
        if not (folder / ds.COACHED).exists():
            raise ds.DatasetError(f"{folder / ds.COACHED}: missing; run `spielbus selfplay coach` first")
        return [(n, n.coach) for n in ds.read_coached(folder)]
    _, nodes = ds.read_nodes(folder)
    return [(n, n.reference) for n in nodes]


def export(folder: Path, out: Path, *, fmt: str, source: str) -> int:
    rows = _rows(folder, source)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", encoding="utf-8") as fh:
        for i, (node, ref) in enumerate(rows):
            fh.write(json.dumps(_format(node, ref, fmt, source, i), ensure_ascii=False) + "\n")
    return len(rows)


def _format(node: ds.Node, ref: list[float], fmt: str, source: str, index: int) -> dict[str, Any]:
    texts = node.texts()
    if fmt == "jsonl":
        return {
            "id": node.id,
            "game": node.game,
            "prompt": node.prompt,
            "reference": ref,
            "legal_actions": texts,
            "weights": weights(texts),
        }
    messages = [{"role": "user", "content": node.prompt}]
    if fmt == "trl":
        return {"id": node.id, "prompt": messages, "reference": ref, "legal_actions": texts}
    if fmt == "verl":
        return {
            "data_source": f"spielbus/{node.game}",
            "prompt": messages,
            "ability": "game",
            "reward_model": {"style": "rule", "ground_truth": {"reference": ref, "legal_actions": texts}},
            "extra_info": {"id": node.id, "index": index, "source": source},
        }
    raise ValueError(f"unknown format {fmt!r}")
