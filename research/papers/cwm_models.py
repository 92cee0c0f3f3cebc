"""The model folders behind `spielbus paper cwm`: synthesized by `research.cwm` with `--llm`, else the
hand-written reference model where `agents/cwm/reference/` has one; and each folder's held-out
accuracy by `research.cwm.eval.evaluate` (kept as `eval.json` beside it, so `--resume` reuses it).

Synthesis runs `python -m research.cwm synthesize` (the `spielbus cwm synthesize` command, its log in
`synth-K.log`) once per synthesis: it records its own trajectories through the referee and runs
every candidate in the sandbox. A synthesis that ran but wrote no code (no candidate held a code
block) stays among the game's folders: it scores 0 on every accuracy (research/cwm/eval.py), as
one of the paper's 5 models would; only folders with code play.
Limits: syntheses run one after another (an LLM server answers one request at a time here); a
synthesis that failed to run is reported with the tail of its log, not retried.
"""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agents.cwm.model_dir import ModelDirError, load_meta
from agents.cwm.reference import reference_code

NEEDS_CODE_MODEL = "needs a model that writes code (the embedded 135M model cannot): give --llm"


@dataclass(frozen=True)
class Synthesis:
    """How to run `research.cwm synthesize`: the `--llm` spec as it takes it, and the sizes."""

    llm: str  # a URL, ollama:URL, or a NAME of an [llm.NAME] section of `config`
    config: str | None
    model: str
    syntheses: int
    budget: int
    trajectories: int
    values: int


@dataclass(frozen=True)
class Models:
    """A game's model folders (relative to the report folder) or why there are none; `folders`
    holds syntheses that wrote no code too (they score 0), `playable` only those with code."""

    folders: list[str]
    reference: bool
    why: str = ""

    @property
    def playable(self) -> list[str]:
        return [f for f in self.folders if not f.endswith(NO_CODE)]


NO_CODE = " (no code)"  # marks a folder whose synthesis wrote no model.py


def folder_path(folder: str) -> str:
    """A `Models.folders` entry without its no-code mark."""
    return folder.removesuffix(NO_CODE)


def has_reference(spec: str) -> bool:
    try:
        reference_code(spec)
    except OSError:
        return False
    return True


def _log_tail(path: Path, n: int = 600) -> str:
    text = path.read_text(errors="replace") if path.exists() else ""
    return " ".join(text[-n:].split())


async def _synthesize(spec: str, folder: Path, seed: int, s: Synthesis) -> str:
    """One synthesis into `folder`; '' when it wrote a model, else why not."""
    argv = [
        sys.executable, "-m", "research.cwm", "synthesize", spec, "--llm", s.llm, "--model", s.model,
        "--budget", str(s.budget), "--trajectories", str(s.trajectories), "--values", str(s.values),
        "--seed", str(seed), "--out", str(folder),
    ]  # fmt: skip
    if s.config:
        argv += ["--config", s.config]
    log = folder.with_suffix(".log")
    with log.open("w") as fh:
        proc = await asyncio.create_subprocess_exec(*argv, stdout=fh, stderr=asyncio.subprocess.STDOUT)
        code = await proc.wait()
    if code != 0:
        return f"synthesis failed (exit {code}): {_log_tail(log)}"
    if not (folder / "model.py").exists():
        return f"no synthesized candidate held code ({folder.name}/report.json lists the attempts)"
    return ""


async def model_folders(out: Path, key: str, spec: str, synthesis: Synthesis | None) -> Models:
    """The game's model folders under `out/models/KEY/`: `synth-K` with `synthesis`, else `reference`."""
    base = out / "models" / key
    if synthesis is None:
        if not has_reference(spec):
            return Models([], False, f"no hand-written reference model of {spec}; {NEEDS_CODE_MODEL}")
        folder = base / "reference"
        if not (folder / "meta.json").exists():
            from research.cwm.model_files import write_reference_dir

            await asyncio.to_thread(write_reference_dir, folder, spec)
        return Models([str(folder.relative_to(out))], True)
    base.mkdir(parents=True, exist_ok=True)
    folders, problems = [], []
    for k in range(synthesis.syntheses):
        folder = base / f"synth-{k}"
        why = "" if (folder / "report.json").exists() else await _synthesize(spec, folder, k, synthesis)
        if (folder / "report.json").exists() and (folder / "meta.json").exists():
            code = (folder / "model.py").exists()
            folders.append(str(folder.relative_to(out)) + ("" if code else NO_CODE))
        else:
            problems.append(why or f"{folder.name}: no meta.json")
    return Models(folders, False, "; ".join(dict.fromkeys(problems)) if not folders else "")


async def evaluation(out: Path, folder: str, games: int, transitions: int, seed: int) -> dict[str, Any]:
    """The held-out accuracy row of one model folder (`cwm eval`), cached in its eval.json."""
    folder = folder_path(folder)
    path = out / folder / "eval.json"
    wanted = {"test_games": games, "seed": seed, "max_transitions": transitions}
    if path.exists():
        row = json.loads(path.read_text())
        if all(row.get(k) == v for k, v in wanted.items()):
            return dict(row)
    from research.cwm.eval import evaluate

    meta = load_meta(out / folder, need_model=(out / folder / "model.py").exists())
    row = await asyncio.to_thread(
        evaluate, out / folder, meta, games=games, transitions=transitions, seed=seed
    )
    row.update(wanted)
    path.write_text(json.dumps(row, indent=1) + "\n")
    return dict(row)


def report_of(out: Path, folder: str) -> dict[str, Any]:
    """A model folder's report.json (the synthesis: train accuracy, LLM calls, attempts)."""
    try:
        return dict(json.loads((out / folder_path(folder) / "report.json").read_text()))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelDirError(f"{folder}/report.json: {exc}") from exc


def best_folder(out: Path, folders: list[str]) -> str:
    """The folder that plays, among those with code: most training tests passed, then fewest LLM
    calls (a reference: itself)."""

    def key(folder: str) -> tuple[float, float]:
        rep = report_of(out, folder)
        total = rep.get("train_tests") or 0
        share = (rep.get("train_tests_passed") or 0) / total if total else 1.0
        return (-share, float(rep.get("llm_calls") or 0))

    return min(folders, key=key)
