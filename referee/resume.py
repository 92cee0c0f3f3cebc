"""What a run folder needs to be resumed: the tournament's fingerprint and reading its records back.

Every run writes `run.json` (the tournament id and the SHA-256 of the normalised tournament
configuration, with the configuration itself) next to `schedule.jsonl`. `spielbus run FILE
--resume RUN_DIR` refuses a folder whose fingerprint differs from FILE's (another tournament,
or the same one edited since), naming the keys that differ, so that a resumed run is always the
run it continues. `run_dir` is left out of the fingerprint: moving a run folder does not change
its tournament.

Reading `matches.jsonl` back keeps the first valid record per match id (the collector's rule)
and drops what cannot be parsed: after a power loss the last line may be cut short; the file is
cut back to its last complete line before anything is appended, and that match is played again.

Limits: the fingerprint covers the tournament file's settings, not the agents' code or models
(a changed agent build is not detected; the records' provenance hashes show it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bus.protocol import MatchRecord
from referee.config import ConfigError, TournamentConfig
from referee.records import read_jsonl

log = logging.getLogger(__name__)

RUN_FILE = "run.json"


def normalised(config: TournamentConfig) -> dict[str, Any]:
    """The configuration as plain JSON values, defaults filled in, `run_dir` left out."""
    return config.model_dump(mode="json", exclude={"run_dir"})


def fingerprint(config: TournamentConfig) -> str:
    text = json.dumps(normalised(config), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def run_info(config: TournamentConfig, tid: str) -> dict[str, Any]:
    return {"tournament": tid, "config_sha256": fingerprint(config), "config": normalised(config)}


def _diff(old: Any, new: Any, path: str = "") -> list[str]:
    """Key paths (dotted) whose values differ between two JSON values."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for k in sorted(set(old) | set(new), key=str):
            p = f"{path}.{k}" if path else str(k)
            if k not in old:
                out.append(f"{p} (new)")
            elif k not in new:
                out.append(f"{p} (removed)")
            else:
                out += _diff(old[k], new[k], p)
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True)) for d in _diff(a, b, f"{path}[{i}]")]
    return [] if old == new else [f"{path or 'configuration'}: {_short(old)} -> {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_resumable(folder: Path, config: TournamentConfig, config_name: str = "the tournament file") -> str:
    """The tournament id of the run folder `folder`, if FILE's `config` is the tournament it ran;
    else `ConfigError` saying what differs (exit 2)."""
    info_path = folder / RUN_FILE
    if not folder.is_dir():
        raise ConfigError(f"--resume {folder}: no such run folder")
    if not (folder / "schedule.jsonl").exists() or not info_path.exists():
        raise ConfigError(
            f"--resume {folder}: not a resumable run folder (it has no schedule.jsonl and {RUN_FILE}; "
            "runs made before resume existed cannot be resumed)"
        )
    try:
        info = json.loads(info_path.read_text(encoding="utf-8"))
        tid, digest, old = str(info["tournament"]), str(info["config_sha256"]), info["config"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"--resume {folder}: unreadable {RUN_FILE}: {exc}") from exc
    if tid != folder.name:
        raise ConfigError(f"--resume {folder}: the folder's {RUN_FILE} names another tournament ({tid})")
    if digest != fingerprint(config):
        new = normalised(config)
        diffs = _diff(old, new) or ["(the stored configuration does not match its own hash)"]
        what = "another tournament" if old.get("name") != new.get("name") else "a changed tournament file"
        raise ConfigError(
            f"--resume {folder}: {config_name} is {what}; differs in "
            + "; ".join(diffs[:8])
            + (f"; and {len(diffs) - 8} more" if len(diffs) > 8 else "")
        )
    return tid


def cut_partial_line(path: Path) -> int:
    """Cut `path` back to its last complete line (a power loss can leave half a line); returns the
    number of bytes dropped."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with path.open("rb+") as fh:
        fh.seek(size - 1)
        if fh.read(1) == b"\n":
            return 0
        pos = size
        while pos > 0:
            step = min(65536, pos)
            fh.seek(pos - step)
            chunk = fh.read(step)
            nl = chunk.rfind(b"\n")
            if nl >= 0:
                keep = pos - step + nl + 1
                break
            pos -= step
        else:
            keep = 0
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    log.warning("%s: dropped a cut-off last line (%d bytes); that match is played again", path, size - keep)
    return size - keep


def read_records(path: Path) -> Iterator[MatchRecord]:
    """The first valid record per match id of a `matches.jsonl`, in file order; unreadable lines
    are skipped with a warning (their matches count as not recorded)."""
    if not path.exists():
        return
    seen: set[str] = set()
    for rec in read_jsonl(path, MatchRecord, skip_bad=True):
        if rec.match_id not in seen:
            seen.add(rec.match_id)
            yield rec
