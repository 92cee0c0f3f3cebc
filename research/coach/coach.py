"""`spielbus selfplay coach`: the LLM Coach of "LLM Coaching LLM in Self-Play Training" (section 5.2).

Batches of nodes (15 by default, the paper's) go to the coach LLM with the prompt of the
paper's appendix D.1 (`coach_prompt.md` beside this file; the game background is filled in
per game), each node with its information set, the true state (the paper's "opponent clues"),
the current policy and each action's simulated EV with its 95% interval. The answer is asked
for as JSON under a JSON schema (the LLM layer's structured output): a diagnosis, and per node
a class label, an analysis and a policy.

Every node's answer is validated; an invalid one is counted by reason and never written:
`not_json` (the answer does not parse; every node of the batch), `bad_shape` (no `nodes`
list), `bad_entry` (an entry without an id), `unknown_node` (an id not in the batch),
`duplicate_node`, `missing_node` (a node of the batch without an entry), `missing_class`,
`missing_analysis`, `bad_policy` (not a list or object of numbers), `illegal_action` (a policy
object naming an action that is not legal), `wrong_length` (not one probability per legal
action), `negative`, `not_finite`, `bad_sum` (off 1 by more than 0.011: two decimals),
`llm_error` (the request failed). Valid policies are rescaled to sum to exactly 1.

Output: `DIR/coached.jsonl` (each node with `class`, `analysis`, `coach`, `coach_model`),
appended batch by batch (a rerun coaches only the nodes not yet there), and
`DIR/coach_report.json`: counts by reason, the valid share, LLM usage, and the paper's
section 6.3 measure, the mean absolute distance between the CFVFP and coach policies over
every (information set, legal action) pair of the valid nodes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

import agents.policy_dataset as ds

TEMPLATE = Path(__file__).with_name("coach_prompt.md")
SUM_TOLERANCE = 0.011
CHANGE_CAP = 0.05
# Seconds to wait for the embedded llama.cpp server to answer (`--server-timeout`): it is polled
# for readiness, so a quick start returns at once; 120 s was too short under load (Leduc coach run).
SERVER_TIMEOUT_S = 900.0
REASONS = (
    "not_json",
    "bad_shape",
    "bad_entry",
    "unknown_node",
    "duplicate_node",
    "missing_node",
    "missing_class",
    "missing_analysis",
    "bad_policy",
    "illegal_action",
    "wrong_length",
    "negative",
    "not_finite",
    "bad_sum",
    "llm_error",
)


class CoachError(ValueError):
    pass


# --- the prompt -------------------------------------------------------------------------------------
def background(game_label: str) -> tuple[str, str]:
    """(title, the [Task Background] lines) for a game."""
    from games.loader import load_game
    from games.rules import rules_text

    game = load_game(game_label)
    if game.get_type().short_name == "simplified_holdem":
        n, stack = game.n, game.stack
        later = "Player 0 (BB)" if n == 2 else f"Player {n - 1} (SB)"
        return "Texas Hold'em", (
            f"- Game info:\n  - {n} players; each starts with {stack} chips ({stack / 2:g}BB)\n"
            "  - Small blind = 1, big blind = 2\n"
            f"- Turn order:\n  - Player 0 = Big Blind (BB), Player {n - 1} = Small Blind (SB)\n"
            f"  - Preflop: Player 1 acts first\n  - Later rounds: {later} acts first\n"
            "- Available actions:\n  - '[Fold]' -- give up the hand\n"
            "  - '[Call]' -- call the current bet (check is merged here)\n"
            "  - '[Raise]' -- raise by 1.5x pot on top of the current bet (fixed)\n"
            "  - '[Allin]' -- go all-in with all chips"
        )
    return game.get_type().long_name, f"- Game: {rules_text(game)}"


def system_prompt(game_label: str) -> str:
    title, bg = background(game_label)
    return TEMPLATE.read_text(encoding="utf-8").format(game_title=title, background=bg)


def _fmt(values: list[float]) -> str:
    return "[" + ", ".join(f"{v:.2f}" for v in values) + "]"


def node_block(node: ds.Node) -> str:
    sims = "; ".join(
        f"{a.text} {q:+.2f} [{lo:+.2f}, {hi:+.2f}]"
        for a, q, (lo, hi) in zip(node.legal, node.q, node.ci, strict=True)
    )
    return (
        f"uuid4_index: {node.id}\n"
        f"- Player: {node.player}\n"
        f"- Information set:\n{textwrap.indent(node.infoset, '    ')}\n"
        f"- Opponent clues (true state): {node.state}\n"
        f"- Legal actions: [{', '.join(node.texts())}]\n"
        f"- Current policy: {_fmt(node.behaviour)}\n"
        f"- Simulation EV (95% CI), {node.rollouts} rollouts per action: {sims}"
    )


def user_prompt(batch: list[ds.Node]) -> str:
    return "Hands:\n\n" + "\n\n".join(node_block(n) for n in batch)


def answer_schema(batch: list[ds.Node]) -> dict[str, Any]:
    """One entry per node, in the batch's order, with its id and one probability per legal action:
    all a grammar can enforce (the sum to 1 cannot be; validation checks it)."""

    def entry(node: ds.Node) -> dict[str, Any]:
        k = len(node.legal)
        return {
            "type": "object",
            "properties": {
                "id": {"type": "string", "const": node.id},
                "class": {"type": "string", "minLength": 1, "maxLength": 30},
                "analysis": {"type": "string", "minLength": 1, "maxLength": 100},
                "policy": {
                    "type": "array",
                    "items": {"type": "number", "minimum": 0, "maximum": 1},
                    "minItems": k,
                    "maxItems": k,
                },
            },
            "required": ["id", "class", "analysis", "policy"],
        }

    return {
        "type": "object",
        "properties": {
            "diagnosis": {"type": "string", "maxLength": 150},
            "nodes": {"type": "array", "prefixItems": [entry(n) for n in batch], "minItems": len(batch),
                      "maxItems": len(batch)},
        },
        "required": ["diagnosis", "nodes"],
    }  # fmt: skip


# --- validation -------------------------------------------------------------------------------------
@dataclass
class Verdict:
    valid: dict[str, tuple[str, str, list[float]]] = field(default_factory=dict)  # id -> (class, analysis, p)
    reasons: Counter[str] = field(default_factory=Counter)


def _policy(raw: Any, node: ds.Node) -> tuple[list[float] | None, str]:
    texts = node.texts()
    if isinstance(raw, dict):
        unknown = [k for k in raw if k not in texts]
        if unknown:
            return None, "illegal_action"
        if len(raw) != len(texts):
            return None, "wrong_length"
        raw = [raw[t] for t in texts]
    if not isinstance(raw, list):
        return None, "bad_policy"
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in raw):
        return None, "bad_policy"
    if len(raw) != len(texts):
        return None, "wrong_length"
    values = [float(v) for v in raw]
    if any(not math.isfinite(v) for v in values):
        return None, "not_finite"
    if any(v < 0 for v in values):
        return None, "negative"
    total = sum(values)
    if abs(total - 1.0) > SUM_TOLERANCE:
        return None, "bad_sum"
    return [v / total for v in values], ""


def validate_answer(text: str, batch: list[ds.Node]) -> Verdict:
    """Which nodes of the batch the answer coaches validly, and why the others are refused."""
    verdict = Verdict()
    by_id = {n.id: n for n in batch}
    try:
        obj = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        verdict.reasons["not_json"] += len(batch)
        return verdict
    if not isinstance(obj, dict) or not isinstance(obj.get("nodes"), list):
        verdict.reasons["bad_shape"] += len(batch)
        return verdict
    seen: set[str] = set()
    for entry in obj["nodes"]:
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
            verdict.reasons["bad_entry"] += 1
            continue
        nid = entry["id"].strip()
        node = by_id.get(nid)
        if node is None:
            verdict.reasons["unknown_node"] += 1
            continue
        if nid in seen:
            verdict.reasons["duplicate_node"] += 1
            verdict.valid.pop(nid, None)  # two answers for one node: neither is trusted
            continue
        seen.add(nid)
        klass, analysis = entry.get("class"), entry.get("analysis")
        if not isinstance(klass, str) or not klass.strip():
            verdict.reasons["missing_class"] += 1
            continue
        if not isinstance(analysis, str) or not analysis.strip():
            verdict.reasons["missing_analysis"] += 1
            continue
        probs, reason = _policy(entry.get("policy"), node)
        if probs is None:
            verdict.reasons[reason] += 1
            continue
        verdict.valid[nid] = (klass.strip(), analysis.strip(), probs)
    missing = sum(1 for nid in by_id if nid not in seen)
    if missing:
        verdict.reasons["missing_node"] += missing
    return verdict


# --- the run ----------------------------------------------------------------------------------------
@dataclass
class CoachReport:
    model: str
    nodes: int = 0
    valid: int = 0
    batches: int = 0
    invalid: Counter[str] = field(default_factory=Counter)
    abs_diffs_cfvfp: list[float] = field(default_factory=list)
    abs_diffs_behaviour: list[float] = field(default_factory=list)
    over_cap: int = 0
    usage: dict[str, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        def mean(xs: list[float]) -> float | None:
            return sum(xs) / len(xs) if xs else None

        return {
            "model": self.model,
            "nodes": self.nodes,
            "batches": self.batches,
            "valid": self.valid,
            "valid_share": self.valid / self.nodes if self.nodes else None,
            "invalid": {r: self.invalid[r] for r in REASONS if self.invalid[r]},
            "mean_abs_distance_cfvfp_coach": mean(self.abs_diffs_cfvfp),
            "mean_abs_distance_behaviour_coach": mean(self.abs_diffs_behaviour),
            "actions_changed_over_0.05": self.over_cap,
            "usage": self.usage,
        }


async def coach_dataset(
    folder: Path,
    client: Any,
    *,
    batch_size: int = 15,
    max_tokens: int = 2048,
    limit: int | None = None,
    on_batch: Any = None,
) -> CoachReport:
    """Coach the nodes of `folder` not yet in coached.jsonl; append the valid ones; return the report."""
    from agents.llm.base import LLMError
    from agents.llm.usage import metered

    if batch_size < 1:
        raise CoachError("--batch must be at least 1")
    meta, nodes = ds.read_nodes(folder)
    done = {n.id for n in ds.iter_rows(folder / ds.COACHED, ds.CoachedNode, meta.game)}
    todo = [n for n in nodes if n.id not in done][: limit if limit is not None else None]
    report = CoachReport(model=client.config.label(), nodes=len(todo))
    system = system_prompt(meta.game)
    with metered() as meter:
        for start in range(0, len(todo), batch_size):
            batch = todo[start : start + batch_size]
            report.batches += 1
            try:
                result = await client.chat(
                    [("system", system), ("user", user_prompt(batch))],
                    schema=answer_schema(batch),
                    max_tokens=max_tokens,
                    temperature=0.0,
                )
                verdict = validate_answer(result.text, batch)
            except LLMError:
                verdict = Verdict(reasons=Counter(llm_error=len(batch)))
            report.invalid.update(verdict.reasons)
            rows = []
            for node in batch:
                got = verdict.valid.get(node.id)
                if got is None:
                    continue
                klass, analysis, probs = got
                row = ds.CoachedNode.model_validate(
                    {
                        **node.model_dump(),
                        "class": klass,
                        "analysis": analysis,
                        "coach": probs,
                        "coach_model": report.model,
                    }
                )
                rows.append(row)
                report.valid += 1
                report.abs_diffs_cfvfp += [abs(a - b) for a, b in zip(node.reference, probs, strict=True)]
                diffs = [abs(a - b) for a, b in zip(node.behaviour, probs, strict=True)]
                report.abs_diffs_behaviour += diffs
                report.over_cap += sum(1 for d in diffs if d > CHANGE_CAP + 1e-9)
            _append(folder / ds.COACHED, rows)
            if on_batch:
                on_batch(start + len(batch), len(todo))
        report.usage = {
            "llm_calls": meter.llm_calls,
            "prompt_tokens": meter.prompt_tokens,
            "completion_tokens": meter.completion_tokens,
            "cache_hits": meter.cache_hits,
            "failed_requests": meter.failures,
        }
    return report


def _append(path: Path, rows: list[ds.CoachedNode]) -> None:
    with open(path, "a", encoding="utf-8") as fh:
        for row in rows:
            ds.append_row(fh, row)


def resolve_llm(
    name: str, base_url: str | None, max_tokens: int, server_timeout: float = SERVER_TIMEOUT_S
) -> tuple[Any, Any]:
    """(LLMConfig, embedded server or None) for `--llm NAME`.

    The embedded server is waited for until it answers (it fails at once if its process dies),
    for at most `server_timeout` seconds: loading the model and the first grammar-constrained
    answer took over 120 s on the shared machine under load, so the bound is generous."""
    from agents.llm.config import LLMConfig, LLMOptions

    server = None
    if name.strip().startswith("{"):
        try:
            config = LLMConfig.model_validate_json(name)
        except ValidationError as exc:
            raise CoachError(f"--llm is not a valid LLM config: {exc.errors()[0]['msg']}") from None
        return config, None
    options = LLMOptions(temperature=0.0, max_tokens=max_tokens, seed=0)
    if name == "embedded":
        from agents.llm.server import EmbeddedServer

        server = EmbeddedServer()
        server.start(timeout_s=server_timeout)
        return LLMConfig(base_url=server.base_url, model="smollm2", options=options, timeout_s=600), server
    return LLMConfig(base_url=base_url, model=name, options=options, timeout_s=600), None


def run_coach_cli(args: argparse.Namespace) -> int:
    from agents.llm.client import LLMClient

    folder = Path(args.dir)
    ds.read_nodes(folder)  # bad input fails here, before any server starts
    config, server = resolve_llm(args.llm, args.base_url, args.max_tokens, args.server_timeout)
    try:
        client = LLMClient(config)

        def progress(done: int, total: int) -> None:
            if not args.quiet:
                print(f"coached {done}/{total} nodes", file=sys.stderr, flush=True)

        async def go() -> CoachReport:
            try:
                return await coach_dataset(
                    folder, client, batch_size=args.batch, max_tokens=args.max_tokens, limit=args.limit,
                    on_batch=progress,
                )  # fmt: skip
            finally:
                await client.aclose()

        report = asyncio.run(go())
    finally:
        if server is not None:
            server.stop()
    out = report.to_json()
    (folder / "coach_report.json").write_text(json.dumps(out, indent=2) + "\n")
    print(json.dumps(out, indent=2))
    if report.nodes and report.invalid.get("llm_error", 0) == report.nodes:
        print(f"spielbus selfplay coach: every request to {report.model} failed", file=sys.stderr)
        return 1
    return 0
