"""The folder `spielbus cwm synthesize` writes and the `cwm` agent and `cwm eval` read.

    model.py          the code world model (for imperfect-information games it also holds the
                      inference function `resample_history`)
    value_<k>.py      value-function candidates (`value_function(state, player_id)`)
    meta.json         game, deck, players, the initial state, the chosen value function
    tests.json        the training unit tests
    report.json       accuracies, LLM calls, tokens, every attempt with its failing test

`load_meta` checks what a reader needs and raises `ModelDirError` naming the file.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

FORMAT = 1


class ModelDirError(ValueError):
    pass


def load_meta(folder: Path, need_model: bool = True) -> dict[str, Any]:
    if not folder.is_dir():
        raise ModelDirError(f"{folder}: no such folder (write one with `spielbus cwm synthesize`)")
    path = folder / "meta.json"
    if not path.is_file():
        raise ModelDirError(f"{path}: missing (not a folder written by `spielbus cwm synthesize`)")
    try:
        meta = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelDirError(f"{path}: not valid JSON ({exc})") from exc
    if not isinstance(meta, dict):
        raise ModelDirError(f"{path}: not a JSON object")
    checks = {
        "format": lambda v: v == FORMAT,
        "game": lambda v: isinstance(v, str) and v,
        "imperfect": lambda v: isinstance(v, bool),
        "closed_deck": lambda v: isinstance(v, bool),
        "num_players": lambda v: isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 16,
        "initial_state": lambda v: v is not None,
        "value_function": lambda v: v is None or (isinstance(v, str) and re.fullmatch(r"value_\d+", v)),
    }
    for key, ok in checks.items():
        if key not in meta or not ok(meta[key]):
            raise ModelDirError(f"{path}: key {key!r} is missing or invalid")
    # Optional (absent in older folders: "history"): which inference function the model has.
    if meta.get("inference", "history") not in ("history", "state"):
        raise ModelDirError(f'{path}: key \'inference\' must be "history" or "state"')
    if need_model:
        model = folder / "model.py"
        if not model.is_file():
            raise ModelDirError(f"{model}: missing (synthesis produced no model code)")
        try:
            model.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            raise ModelDirError(f"{model}: unreadable ({exc})") from exc
        if meta["value_function"] and not (folder / f"{meta['value_function']}.py").is_file():
            raise ModelDirError(f"{folder / (meta['value_function'] + '.py')}: missing (named in meta.json)")
    return meta


def load_report(folder: Path) -> dict[str, Any]:
    path = folder / "report.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"{path}: unreadable ({exc})") from exc
    if not isinstance(data, dict):
        raise ModelDirError(f"{path}: not a JSON object")
    return data
