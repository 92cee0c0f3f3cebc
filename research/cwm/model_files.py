"""Writing the model folder (`agents.cwm.model_dir` reads it): a synthesis result, or a
hand-written reference model for tests, benchmarks and trying the agent without an LLM."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agents.cwm.model_dir import FORMAT


def write_model_dir(out: Path, task: Any, result: dict[str, Any], game: Any, trajs: Any) -> None:
    from research.cwm.trajectories import initial_state

    out.mkdir(parents=True, exist_ok=True)
    if result["code"]:
        (out / "model.py").write_text(result["code"] + "\n")
    for name, code in result["values"].items():
        (out / f"{name}.py").write_text(code + "\n")
    meta = {
        "format": FORMAT,
        "game": task.game,
        "imperfect": task.imperfect,
        "closed_deck": task.closed_deck,
        "num_players": game.num_players(),
        "initial_state": initial_state(game),
        "value_function": result["report"].get("value_function"),
        "inference": getattr(task, "inference", "history"),
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "tests.json").write_text(json.dumps(task.tests) + "\n")
    (out / "report.json").write_text(json.dumps(result["report"], indent=1) + "\n")


def write_reference_dir(out: Path, game_name: str, inference: str = "history") -> None:
    """A model folder holding a hand-written reference model (`agents/cwm/reference/`), marked
    as such in report.json: for tests, benchmarks and trying the agent without an LLM. With
    `inference` "state" the agent resamples with the model's `resample_state` (appendix H.4)."""
    from agents.cwm.reference import reference_code
    from games.loader import load_game
    from games.view import is_perfect_information
    from research.cwm import trajectories as T

    game = load_game(game_name)
    code = reference_code(game_name)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model.py").write_text(code)
    meta = {
        "format": FORMAT,
        "game": game_name,
        "imperfect": not is_perfect_information(game),
        "closed_deck": False,
        "num_players": game.num_players(),
        "initial_state": T.initial_state(game),
        "value_function": None,
        "inference": inference,
    }
    (out / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    (out / "tests.json").write_text("[]\n")
    report = {
        "game": game_name,
        "reference": True,
        "llm_calls": 0,
        "note": "hand-written, not synthesized",
        "train_transition_accuracy": None,
        "train_inference_accuracy": None,
    }
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
