"""The papers' own numbers (paper_numbers.toml beside this module), validated strictly.

Limits: one number per cell (a win rate or an accuracy in [0, 1]); the source says where it is printed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

NUMBERS_FILE = Path(__file__).with_name("paper_numbers.toml")


class PaperNumber(BaseModel):
    """One number as the paper prints it, and where."""

    model_config = ConfigDict(strict=True, extra="forbid")
    title: str
    value: float = Field(ge=0.0, le=1.0, allow_inf_nan=False)
    source: str


def paper_numbers(paper: str, path: Path = NUMBERS_FILE) -> dict[str, PaperNumber]:
    """The numbers of one paper by cell name (empty when the file has none for it)."""
    data = tomllib.loads(path.read_text())
    return {cell: PaperNumber.model_validate(v) for cell, v in data.get(paper, {}).items()}
