"""Prices from a file (issue 38, point 7): `[llm.NAME] price_file = "prices.toml"`, one table per model
(agents/llm/prices.py), validated strictly with the file, line and key named; the model's entry
prices its calls as `price = {...}` would."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.llm import LLMClient, LLMConfig, metered
from agents.llm.prices import PriceFileError, load_prices
from tests.llm_standins import OpenAIStandIn, Scene

ROOT = Path(__file__).resolve().parents[1]

PRICES = """\
# dollars per million tokens
["gpt-4.1-mini"]
input_per_mtok = 0.40
cached_input_per_mtok = 0.10
output_per_mtok = 2

["deepseek/deepseek-r1"]
input_per_mtok = 0.55
output_per_mtok = 2.19
reasoning_per_mtok = 4.0
"""


def _file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "prices.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_each_model_gets_its_own_prices(tmp_path: Path) -> None:
    path = _file(tmp_path, PRICES)
    table = load_prices(path)
    assert set(table) == {"gpt-4.1-mini", "deepseek/deepseek-r1"}
    assert table["gpt-4.1-mini"].output_per_mtok == 2.0  # an integer is a price too
    r1 = LLMConfig(model="deepseek/deepseek-r1", price_file=str(path)).price
    assert r1 is not None and (r1.input_per_mtok, r1.reasoning_per_mtok) == (0.55, 4.0)


async def test_calls_are_priced_from_the_file(standin: OpenAIStandIn, tmp_path: Path) -> None:
    path = _file(tmp_path, PRICES)
    standin.default = Scene(content="b", reasoning="r", reasoning_tokens=1000)
    config = LLMConfig.model_validate(
        {"base_url": standin.url, "model": "deepseek/deepseek-r1", "cache": False, "price_file": str(path)}
    )
    client = LLMClient(config)
    try:
        with metered() as meter:
            result = await client.chat([("user", "one two three")], deadline=time.monotonic() + 10)
    finally:
        await client.aclose()
    completion = result.completion_tokens
    expected = (result.prompt_tokens * 0.55 + (completion - 1000) * 2.19 + 1000 * 4.0) / 1e6
    assert meter.calls[0]["cost_usd"] == pytest.approx(expected)


@pytest.mark.parametrize(
    ("body", "line", "key", "msg"),
    [
        ("input_per_mtok = -1\noutput_per_mtok = 1", 2, "m.input_per_mtok", "greater than or equal to 0"),
        ("input_per_mtok = 1\noutput_per_mtok = inf", 3, "m.output_per_mtok", "finite number"),
        ("input_per_mtok = nan\noutput_per_mtok = 1", 2, "m.input_per_mtok", "finite number"),
        ('input_per_mtok = "1"\noutput_per_mtok = 1', 2, "m.input_per_mtok", "valid number"),
        ("input_per_mtok = true\noutput_per_mtok = 1", 2, "m.input_per_mtok", "valid number"),
        ("input_per_mtok = 1\noutput_per_mtok = 1\nreasoning = 2", 4, "m.reasoning", "unknown key"),
        ("input_per_mtok = 1", 1, "m.output_per_mtok", "Field required"),
    ],
)
def test_a_bad_price_is_named_by_file_line_and_key(
    tmp_path: Path, body: str, line: int, key: str, msg: str
) -> None:
    path = _file(tmp_path, f"[m]\n{body}\n")
    with pytest.raises(PriceFileError) as err:
        load_prices(path)
    assert f"{path}:{line}: {key}: " in str(err.value) and msg in str(err.value)


def test_a_price_file_that_cannot_price_the_model_is_refused(tmp_path: Path) -> None:
    path = _file(tmp_path, PRICES)
    with pytest.raises(ValidationError, match="has no prices for model 'gpt-5'"):
        LLMConfig(model="gpt-5", price_file=str(path))
    with pytest.raises(ValidationError, match="price or price_file, not both"):
        LLMConfig.model_validate(
            {
                "model": "gpt-4.1-mini",
                "price_file": str(path),
                "price": {"input_per_mtok": 1, "output_per_mtok": 1},
            }
        )
    with pytest.raises(ValidationError, match="cannot read price file"):
        LLMConfig(model="m", price_file=str(tmp_path / "missing.toml"))
    with pytest.raises(ValidationError, match="not valid TOML"):
        LLMConfig(model="m", price_file=str(_file(tmp_path, "[m\n")))


def test_an_agent_with_a_bad_price_file_exits_2_naming_it(tmp_path: Path) -> None:
    path = _file(tmp_path, "[smollm2]\ninput_per_mtok = 1\noutput_per_mtok = -0.5\n")
    options = {"llm": {"price_file": str(path)}}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "agents",
            "llm_policy",
            "--name",
            "a",
            "--options",
            json.dumps(options),
            "--check",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:3: smollm2.output_per_mtok: " in proc.stderr
