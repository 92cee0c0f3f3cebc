"""`policy_table`: play a learned table where it knows the information set, the LLM policy elsewhere.

The table comes from a self-play dataset (`spielbus selfplay collect` / `coach`) or a solver
table (`spielbus selfplay solve`): `source = "coach"` plays the LLM Coach's policies
(`coached.jsonl`), `"reference"` the CFVFP reference policies (`nodes.jsonl`, eq. 10 of "LLM
Coaching LLM in Self-Play Training"), `"behaviour"` the policy the data was collected with,
`"policy"` a solver table. Information sets are matched by the turn's observation, which for
imperfect-information games is the seat's information state string (the dataset's
`infoset`); an information set sampled more than once plays the mean of its rows.

Elsewhere it falls back to `fallback_policy`: `llm` (the `llm_policy` strategy with these
options, `distribution` mode by default) or `uniform`. Each move's stats say which answered
(`table = 1` or `llm = 1` / `uniform = 1`), and the move carries the played distribution.

Limits: the whole table is held in memory; a row whose legal actions differ from the
turn's is not used (the fallback plays).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from agents.base import Decision, MatchContext, decision_rng
from agents.llm_policy import LLMPolicyOptions, LLMPolicyStrategy
from bus.protocol import MoveStats, Turn

Source = Literal["coach", "reference", "behaviour", "policy"]


class PolicyTableOptions(LLMPolicyOptions):
    table: str = Field(description="a `spielbus selfplay` dataset folder or a JSONL table file")
    source: Source = "coach"
    fallback_policy: Literal["llm", "uniform"] = "llm"
    mode: Literal["direct", "vote", "distribution"] = "distribution"

    @model_validator(mode="after")
    def _table_loads(self) -> PolicyTableOptions:
        # Loaded (and kept) here, so that a bad table is a bad option: `--check` names its line.
        if not Path(self.table).exists():
            raise ValueError(f"table {self.table!r} does not exist")
        cached_table(self.table, self.source)
        return self


_TABLES: dict[tuple[str, str, float], dict[str, dict[int, float]]] = {}


def cached_table(path: str, source: Source) -> dict[str, dict[int, float]]:
    """`load_table`, once per (file, source, modification time) in this process."""
    p = Path(path)
    target = p / ("coached.jsonl" if source == "coach" else "nodes.jsonl") if p.is_dir() else p
    stamp = target.stat().st_mtime if target.exists() else 0.0
    key = (str(p.resolve()), source, stamp)
    if key not in _TABLES:
        _TABLES[key] = load_table(p, source)
    return _TABLES[key]


def load_table(path: str | Path, source: Source) -> dict[str, dict[int, float]]:
    """Information state string -> {action id: probability} (the mean over repeated rows)."""
    import agents.policy_dataset as ds

    path = Path(path)
    if path.is_dir():
        meta = ds.read_meta(path)
        file = path / (ds.COACHED if source == "coach" else ds.NODES)
        if not file.exists():
            raise ValueError(f"{file} is missing (source {source!r}): run `spielbus selfplay` first")
        game: str | None = meta.game
    else:
        file, game = path, None
    model = {"coach": ds.CoachedNode, "policy": ds.TableRow}.get(source, ds.Node)
    sums: dict[str, dict[int, float]] = defaultdict(lambda: defaultdict(float))
    counts: dict[str, int] = defaultdict(int)
    for row in ds.iter_rows(file, model, game):
        probs = getattr(row, "coach" if source == "coach" else source)
        for a, p in zip(row.legal, probs, strict=True):
            sums[row.infoset][a.id] += p
        counts[row.infoset] += 1
    return {key: {a: p / counts[key] for a, p in acts.items()} for key, acts in sums.items()}


class PolicyTableStrategy(LLMPolicyStrategy):
    kind = "policy_table"
    Options = PolicyTableOptions

    def __init__(self, options: PolicyTableOptions, client: object = None) -> None:
        super().__init__(options, client)
        self.opts: PolicyTableOptions = options
        self.table = cached_table(options.table, options.source)

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        legal = [a.id for a in turn.legal_actions]
        probs = self.table.get(turn.observation)
        if probs is not None and set(probs) == set(legal):
            weights = [probs[a] for a in legal]
            action = decision_rng(self.opts.seed, turn).choices(legal, weights=weights)[0]
            return Decision(
                action=action,
                policy={str(a): w for a, w in zip(legal, weights, strict=True)},
                stats=MoveStats(table=1),
                note=f"table ({self.opts.source})",
            )
        if self.opts.fallback_policy == "llm":
            decision = await super().decide(turn, ctx)
            self._stat(decision, llm=1)
            return decision
        action = decision_rng(self.opts.seed, turn).choice(legal)
        return Decision(
            action=action, policy={str(a): 1 / len(legal) for a in legal}, stats=MoveStats(uniform=1)
        )
