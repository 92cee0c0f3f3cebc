"""Prices: `Price`, one model's table (`[llm.NAME] price = {...}`), and a file of them per model,
`[llm.NAME] price_file = "prices.toml"`.

The file is TOML, one table per model name as the endpoint knows it (quote names with dots or
slashes), each with the keys of `Price`, in dollars per million tokens:

    ["gpt-4.1-mini"]
    input_per_mtok = 0.40
    cached_input_per_mtok = 0.10
    output_per_mtok = 1.60

    ["deepseek/deepseek-r1"]
    input_per_mtok = 0.55
    output_per_mtok = 2.19
    reasoning_per_mtok = 2.19

Validated strictly (known keys only, finite non-negative numbers, integers accepted for floats);
every problem is named with the file, its line and the key (`PriceFileError`, a ValueError: a bad
`[llm.NAME]` as any other). A model the file does not price is an error too: a run would otherwise
report no cost for it without saying why. Paths are relative to the working directory.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError

from bus.toml_lines import line_of

MAX_FILE_BYTES = 1_000_000


class Price(BaseModel):
    """Dollars per million tokens. Cached prompt tokens at `cached_input_per_mtok` (None: the input
    price), reasoning tokens at `reasoning_per_mtok` (None: the output price), and
    `failed_request` dollars per request that got no completion (0: failures cost nothing)."""

    model_config = ConfigDict(extra="forbid", strict=True)
    input_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    output_per_mtok: float = Field(ge=0, allow_inf_nan=False)
    cached_input_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    reasoning_per_mtok: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    failed_request: float = Field(default=0.0, ge=0, allow_inf_nan=False)

    def cost(self, prompt: int, cached: int, completion: int, reasoning: int) -> float:
        """Dollars for one answered request; `reasoning` is part of `completion`."""
        cached = min(max(cached, 0), prompt)
        reasoning = min(max(reasoning, 0), completion)
        cached_rate = (
            self.input_per_mtok if self.cached_input_per_mtok is None else self.cached_input_per_mtok
        )
        think_rate = self.output_per_mtok if self.reasoning_per_mtok is None else self.reasoning_per_mtok
        total = (
            (prompt - cached) * self.input_per_mtok
            + cached * cached_rate
            + (completion - reasoning) * self.output_per_mtok
            + reasoning * think_rate
        )
        return total / 1_000_000


class PriceFileError(ValueError):
    """A price file that cannot be read or is not valid; the message names the file, line and key."""


class PriceTable(RootModel[dict[str, Price]]):
    """The file: model name -> its prices."""


def load_prices(path: str | Path) -> dict[str, Price]:
    p = Path(path)
    try:
        if p.stat().st_size > MAX_FILE_BYTES:
            raise PriceFileError(f"{p}: larger than {MAX_FILE_BYTES} bytes")
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise PriceFileError(f"cannot read price file {p}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise PriceFileError(f"{p}: not UTF-8 text") from exc
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PriceFileError(f"{p}: not valid TOML: {exc}") from exc
    try:
        return PriceTable.model_validate(raw, strict=True).root
    except ValidationError as exc:
        problems = []
        for err in exc.errors():
            loc = tuple(err.get("loc", ()))
            line = line_of(text, loc)
            msg = "unknown key" if err.get("type") == "extra_forbidden" else err.get("msg", "invalid")
            key = ".".join(str(x) for x in loc) or "(top level)"
            problems.append(f"{p}:{line}: {key}: {msg}" if line else f"{p}: {key}: {msg}")
        raise PriceFileError("invalid price file: " + "; ".join(problems)) from exc


def price_for(path: str | Path, model: str) -> Price:
    """The prices of `model` in the file at `path`; PriceFileError when it has none or is bad."""
    table = load_prices(path)
    if model not in table:
        known = ", ".join(sorted(table)[:20]) or "none"
        raise PriceFileError(f"price file {path} has no prices for model {model!r} (it prices: {known})")
    return table[model]
