"""The papers' own numbers (paper_numbers.toml beside this module), validated strictly.

Limits: one number per cell, in the cell's unit: a win rate (`share`), an `accuracy` or a share of
`rounds` in [0, 1], a count of LLM `calls`, a mean `payoff` or `points` (Go territory), or an `elo`
rating (with the paper's +- in `plus_minus`); the source says where it is printed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

NUMBERS_FILE = Path(__file__).with_name("paper_numbers.toml")

# `points`: a mean score such as Go territory; `rounds`: a share of rounds (Wordn't) rather than games.
Unit = Literal["share", "accuracy", "calls", "payoff", "elo", "points", "rounds"]


class PaperNumber(BaseModel):
    """One number as the paper prints it, and where."""

    model_config = ConfigDict(strict=True, extra="forbid")
    title: str
    value: float = Field(allow_inf_nan=False)
    source: str
    unit: Unit = "share"
    plus_minus: float | None = Field(default=None, ge=0.0, allow_inf_nan=False)

    @model_validator(mode="after")
    def _in_range(self) -> PaperNumber:
        if self.unit in ("share", "accuracy", "rounds") and not 0.0 <= self.value <= 1.0:
            raise ValueError(f"{self.title}: a {self.unit} must be in [0, 1], not {self.value}")
        if self.unit == "calls" and self.value < 0:
            raise ValueError(f"{self.title}: a count of LLM calls cannot be negative")
        return self


def paper_numbers(paper: str, path: Path = NUMBERS_FILE) -> dict[str, PaperNumber]:
    """The numbers of one paper by cell name (empty when the file has none for it)."""
    data = tomllib.loads(path.read_text())
    return {cell: PaperNumber.model_validate(v) for cell, v in data.get(paper, {}).items()}
