"""The self-play node dataset on disk: `DIR/meta.json` plus JSON Lines files of nodes.

A node is one sampled information set (eq. 8 of "LLM Coaching LLM in Self-Play Training"):
its text and JSON views, legal actions, the behaviour policy played there, each action's
estimated counterfactual Q-value with its 95% confidence interval, and the CFVFP reference
policy (eq. 10). `coached.jsonl` rows add the coach's class, analysis and policy.

Reading is strict: every line must be a complete JSON object of the right shape (finite
numbers, one entry per legal action, distributions summing to 1) and of the dataset's
game, or `DatasetError` names the file and line. `read_nodes(..., repair_tail=True)` (used
by a resumed `collect`) drops an incomplete last line, the mark of an interrupted write.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from bus.protocol import LegalAction

NODES = "nodes.jsonl"
COACHED = "coached.jsonl"
META = "meta.json"
FORMAT = "spielbus-selfplay-nodes"
SUM_TOLERANCE = 1e-6


class DatasetError(ValueError):
    """A dataset that cannot be used; the message names the file and line."""


def _finite(values: list[float], name: str) -> list[float]:
    if any(not math.isfinite(v) for v in values):
        raise ValueError(f"{name} holds a non-finite number")
    return values


def _distribution(values: list[float], name: str) -> list[float]:
    _finite(values, name)
    if any(v < 0 for v in values):
        raise ValueError(f"{name} has a negative entry")
    if abs(sum(values) - 1.0) > SUM_TOLERANCE * max(1, len(values)):
        raise ValueError(f"{name} sums to {sum(values):.6g}, not 1")
    return values


class Meta(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    format: str = FORMAT
    version: int = 1
    game: str
    policy: str
    rollouts: int = Field(ge=2)
    alpha: float = Field(gt=0, le=1)
    seed: int
    sample: float = Field(gt=0, le=1)


class Node(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    id: str
    game: str
    episode: int = Field(ge=0)
    step: int = Field(ge=0)
    player: int = Field(ge=0)
    infoset: str
    observation_json: Any = None
    prompt: str
    legal: list[LegalAction] = Field(min_length=1)
    behaviour: list[float]
    q: list[float]
    ci: list[tuple[float, float]]
    rollouts: int = Field(ge=2)
    reference: list[float]
    state: str  # the true state, other seats' private cards included (the coach's "opponent clues")
    history: list[int]

    @field_validator("behaviour", "reference")
    @classmethod
    def _dist(cls, v: list[float], info: Any) -> list[float]:
        return _distribution(v, info.field_name)

    @field_validator("q")
    @classmethod
    def _q(cls, v: list[float]) -> list[float]:
        return _finite(v, "q")

    @model_validator(mode="after")
    def _lengths(self) -> Node:
        k = len(self.legal)
        for name in ("behaviour", "q", "ci", "reference"):
            if len(getattr(self, name)) != k:
                raise ValueError(f"{name} has {len(getattr(self, name))} entries for {k} legal actions")
        for lo, hi in self.ci:
            if not (math.isfinite(lo) and math.isfinite(hi) and lo <= hi):
                raise ValueError("ci holds a bad interval")
        return self

    def texts(self) -> list[str]:
        return [a.text for a in self.legal]


class CoachedNode(Node):
    klass: str = Field(alias="class", min_length=1)
    analysis: str = Field(min_length=1)
    coach: list[float]
    coach_model: str

    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)

    @field_validator("coach")
    @classmethod
    def _coach(cls, v: list[float]) -> list[float]:
        return _distribution(v, "coach")

    @model_validator(mode="after")
    def _coach_len(self) -> CoachedNode:
        if len(self.coach) != len(self.legal):
            raise ValueError(f"coach has {len(self.coach)} entries for {len(self.legal)} legal actions")
        return self


class TableRow(BaseModel):
    """One information set of a solver table (`spielbus selfplay solve`)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    game: str
    infoset: str
    legal: list[LegalAction] = Field(min_length=1)
    policy: list[float]

    @field_validator("policy")
    @classmethod
    def _dist(cls, v: list[float]) -> list[float]:
        return _distribution(v, "policy")

    @model_validator(mode="after")
    def _lengths(self) -> TableRow:
        if len(self.policy) != len(self.legal):
            raise ValueError(f"policy has {len(self.policy)} entries for {len(self.legal)} legal actions")
        return self


def read_meta(folder: Path) -> Meta:
    path = folder / META
    if not path.exists():
        raise DatasetError(f"{path}: missing (not a `spielbus selfplay collect` folder)")
    try:
        return Meta.model_validate_json(path.read_text())
    except ValidationError as exc:
        raise DatasetError(f"{path}: {_problems(exc)}") from None


def write_meta(folder: Path, meta: Meta) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / (META + ".tmp")
    tmp.write_text(meta.model_dump_json(indent=2) + "\n")
    os.replace(tmp, folder / META)


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(line)'}: {e['msg']}" for e in exc.errors())


def iter_rows(path: Path, model: type[Any], game: str | None, repair_tail: bool = False) -> Iterator[Any]:
    """Validated rows of a JSONL file. With `repair_tail`, an incomplete last line is cut off the file."""
    if not path.exists():
        return
    data = path.read_bytes()
    lines = data.split(b"\n")
    complete = data.endswith(b"\n") or not data
    if not complete and repair_tail:
        keep = data.rfind(b"\n") + 1
        with open(path, "r+b") as fh:
            fh.truncate(keep)
        lines = data[:keep].split(b"\n")
        complete = True
    for no, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        last = no == len(lines)
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            what = "truncated (incomplete last line)" if last and not complete else f"not JSON ({exc.msg})"
            raise DatasetError(f"{path}:{no}: {what}") from None
        if not isinstance(obj, dict):
            raise DatasetError(f"{path}:{no}: not a JSON object")
        if game is not None and obj.get("game") != game:
            raise DatasetError(
                f"{path}:{no}: a node of game {obj.get('game')!r}, but this dataset is {game!r}"
            )
        try:
            yield model.model_validate_json(raw)
        except ValidationError as exc:
            raise DatasetError(f"{path}:{no}: {_problems(exc)}") from None
        if last and not complete:
            raise DatasetError(f"{path}:{no}: truncated (no end of line)")


def read_nodes(folder: Path, repair_tail: bool = False) -> tuple[Meta, list[Node]]:
    meta = read_meta(folder)
    return meta, list(iter_rows(folder / NODES, Node, meta.game, repair_tail))


def read_coached(folder: Path) -> list[CoachedNode]:
    meta = read_meta(folder)
    return list(iter_rows(folder / COACHED, CoachedNode, meta.game))


def append_row(fh: Any, row: BaseModel) -> None:
    fh.write(row.model_dump_json(by_alias=True) + "\n")
    fh.flush()
