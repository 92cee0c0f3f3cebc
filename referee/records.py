"""Making every match record storable: repaired if it must be, never dropped.

A record is storable when its JSON reads back as the same kind of record (what every
collector does with it). What an agent put in it can break that: `NaN`, `Infinity` or
`1e400` in a `policy` or in `stats` (JSON has no such numbers; pydantic writes them as
`null`, which a `policy` may not hold), or a lone surrogate in a note. `repair_record`
drops exactly those values and says so in `repaired`; if the record still does not read
back, it keeps the match's identity and stores it as outcome `error` with the reason.

`read_jsonl` is the one reader of a run folder's JSON Lines files (`matches.jsonl`,
`schedule.jsonl`): strict for a command that reports on a run, lenient for a resume.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from bus.protocol import MatchRecord

log = logging.getLogger(__name__)

_DROP = object()
M = TypeVar("M", bound=BaseModel)


class JsonlError(ValueError):
    """A JSON Lines file that cannot be read, or a line of it that is not what it should be
    (the message names the file and the line)."""


def read_jsonl(path: Path, model: type[M], *, skip_bad: bool = False) -> Iterator[M]:
    """Each non-blank line of `path` as a `model`, in file order. A line that is not one raises
    JsonlError, or with `skip_bad` is logged and skipped; an unreadable file raises JsonlError."""
    try:
        fh = path.open(encoding="utf-8")
    except OSError as exc:
        raise JsonlError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with fh:
        try:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    yield model.model_validate_json(line)
                except ValidationError as exc:
                    what = f"{path}:{n}: not a {model.__name__}"
                    if not skip_bad:
                        first = exc.errors()[0].get("msg")
                        raise JsonlError(f"{what}: {first} ({exc.error_count()} problems)") from None
                    log.warning("%s; skipped", what)
        except UnicodeDecodeError as exc:
            raise JsonlError(f"{path} is not UTF-8 text: {exc.reason}") from exc


def _clean(value: Any, dropped: list[str], where: str) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        dropped.append(where)
        return _DROP
    if isinstance(value, str):
        fixed = value.encode("utf-8", "replace").decode("utf-8")
        if fixed != value:
            dropped.append(where)
        return fixed
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            c = _clean(v, dropped, where)
            if c is not _DROP:
                out[_clean(k, dropped, where) if isinstance(k, str) else k] = c
        return out
    if isinstance(value, list):
        return [c for c in (_clean(v, dropped, where) for v in value) if c is not _DROP]
    return value


def storable(record: MatchRecord) -> bool:
    try:
        MatchRecord.model_validate_json(record.model_dump_json())
    except (ValidationError, ValueError):
        return False
    return True


def repair_record(record: MatchRecord) -> MatchRecord:
    """`record` itself when it is storable, else a repaired copy, else an `error` record."""
    if storable(record):
        return record
    dropped: list[str] = []
    data = record.model_dump(mode="python")
    for i, move in enumerate(data.get("moves", [])):
        for field in ("policy", "stats", "note", "usage", "text"):
            if move.get(field) is not None:
                cleaned = _clean(move[field], dropped, f"moves[{i}].{field}")
                move[field] = None if cleaned is _DROP else cleaned
    for key in ("faults", "provenance", "error", "returns"):
        if data.get(key) is not None:
            cleaned = _clean(data[key], dropped, key)
            data[key] = None if cleaned is _DROP else cleaned
    where = sorted(set(dropped))
    note = "dropped non-finite numbers or invalid text at " + ", ".join(where[:10])
    if len(where) > 10:
        note += f" and {len(where) - 10} more places"
    try:
        data["repaired"] = note
        fixed = MatchRecord.model_validate(data)
        if storable(fixed):
            return fixed
    except (ValidationError, ValueError):
        pass
    n = len(record.seats)
    return MatchRecord(
        match_id=record.match_id,
        tournament=record.tournament,
        game=record.game,
        seats=record.seats,
        seed=record.seed,
        outcome="error",
        returns=[0.0] * n,
        ranks=[1] * n,
        started_at=record.started_at,
        ended_at=record.ended_at,
        error="the record could not be stored as played (unreadable values); its moves are left out",
        secret=record.secret,
        attempt=record.attempt,
        repaired="every move and fault left out",
    )
