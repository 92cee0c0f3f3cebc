"""`spielbus agent KIND` flags are made from each kind's options model (agents/cli.py): every
option of every registered kind has a flag, its --help names it, and a value given by flags
comes back as the same options."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from agents.cli import add_option_flags, build_parser, main, options_raw
from agents.llm_mcts import LlmMctsOptions
from agents.registry import KINDS, strategy_class
from research.cwm.model_files import write_reference_dir


def _required(kind: str, tmp: Path) -> dict[str, Any]:
    """Fields without a default, per kind: a value the model accepts (both name a path that exists)."""
    if kind == "cwm":
        write_reference_dir(tmp / "model", "tic_tac_toe")
        return {"model": str(tmp / "model")}
    if kind == "policy_table":
        (tmp / "t.jsonl").write_text("")
        return {"table": str(tmp / "t.jsonl")}
    return {}


def _tokens(name: str, value: Any, annotation_is_bool: bool) -> list[str]:
    flag = "--" + name.replace("_", "-")
    if annotation_is_bool:
        return [flag if value else "--no-" + flag[2:]]
    if isinstance(value, BaseModel):
        return [flag, json.dumps(value.model_dump(mode="json"))]
    if isinstance(value, dict | list):
        return [flag, json.dumps(value)]
    return [flag, str(value)]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_option_has_a_flag_that_round_trips(kind: str, tmp_path: Path) -> None:
    model = strategy_class(kind).Options
    ref = model.model_validate(_required(kind, tmp_path))
    parser, names = build_parser(kind)
    assert names == list(model.model_fields)
    helptext = parser.format_help()
    argv = [kind, "--name", "x"]
    for name, field in model.model_fields.items():
        assert "--" + name.replace("_", "-") in helptext
        value = getattr(ref, name)
        if value is not None:
            argv += _tokens(name, value, field.annotation is bool)
    args = parser.parse_args(argv)
    given = {n for n in names if getattr(ref, n) is not None}
    assert {n for n in names if getattr(args, f"opt_{n}") is not None} == given  # each flag was read
    assert model.model_validate(options_raw(args, names)) == ref


def test_flags_override_options_json_and_take_structured_values() -> None:
    parser, names = build_parser("llm_mcts")
    args = parser.parse_args(
        ["llm_mcts", "--name", "x", "--options", '{"k": 2, "simulations": 9}', "--k", "5",
         "--critic", "rule", "--no-constrain", "--llm", '{"model": "other", "timeout_s": 30}']
    )  # fmt: skip
    opts = LlmMctsOptions.model_validate(options_raw(args, names))
    assert (opts.k, opts.simulations, opts.critic, opts.constrain) == (5, 9, "rule", False)
    assert opts.llm.model == "other" and opts.llm.timeout_s == 30


def test_bad_flag_values_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["llm_mcts", "--name", "x", "--critic", "oracle", "--check"])  # not one of the choices
    assert exc.value.code == 2 and "--critic" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exc:
        main(["llm_mcts", "--name", "x", "--llm", "{not json", "--check"])
    assert exc.value.code == 2 and "not JSON" in capsys.readouterr().err
    assert main(["random", "--name", "x", "--options", "[1]", "--check"]) == 2
    assert "JSON object" in capsys.readouterr().err
    assert main(["mcts", "--name", "x", "--simulations", "0", "--check"]) == 2  # the model's own check
    assert "simulations" in capsys.readouterr().err


def test_games_it_does_not_play_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ghost_solver", "--name", "x", "--games", "ghost,tic_tac_toe", "--check"]) == 2
    assert "plays only ghost, not tic_tac_toe" in capsys.readouterr().err
    assert main(["ghost_solver", "--name", "x", "--games", "ghost", "--check"]) == 0
    assert main(["random", "--name", "x", "--games", "ghost,chess", "--check"]) == 0  # any game


def test_help_states_defaults_and_choices() -> None:
    class Opts(BaseModel):
        depth: int = 3
        mode: str = "a"

    parser = argparse.ArgumentParser()
    assert add_option_flags(parser, "t", Opts) == ["depth", "mode"]
    text = parser.format_help()
    assert "(default: 3)" in text and "(default: 'a')" in text
    llm_help = build_parser("llm_mcts")[0].format_help()
    assert "--llm JSON" in llm_help and "LLMConfig's defaults" in llm_help
