"""A run folder, `<run_dir>/<tournament id>/`: what a tournament run leaves on disk.

`matches.jsonl` (one record a line, appended and flushed as each arrives, so an interrupted run
keeps every match it finished; a half-written last line from a power loss is cut on open),
`pgn/<match id>.pgn` for chess matches (referee/pgn.py), `schedule.jsonl` (the specs with their
chance secrets: private, mode 0600), `run.json` (the configuration's fingerprint, for `--resume`;
referee/resume.py), and after play `standings.json`, `ratings.json` and `summary.json`.
`tournament_id` names the folder; `summarize` gives the standings and ratings every view of a
run writes or prints.

A folder that cannot be written (full disk, read-only) raises `RunFolderError`; the match
stream keeps every record, so `spielbus collect` rebuilds the folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import time
from pathlib import Path

from bus.protocol import MatchRecord, MatchSpec
from referee import pgn, resume
from referee.config import TournamentConfig
from referee.provenance import split_by_provenance
from referee.ratings import Rating, Standing, ratings, standings


class RunFolderError(RuntimeError):
    """The run folder cannot be written (full disk, permissions)."""


def tournament_id(config: TournamentConfig, now: float | None = None) -> str:
    """`<name>-<date>-<time to the millisecond>-<6 random hex>`: two submissions never collide,
    not even within one millisecond (the id names the run folder and prefixes every match id)."""
    t = now or time.time()
    ms = int((t % 1) * 1000)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(t))
    return f"{config.name}-{stamp}{ms:03d}-{secrets.token_hex(3)}"


class RunFolder:
    """`<run_dir>/<tournament id>/`: matches.jsonl, standings.json, ratings.json, tournament.toml,
    schedule.jsonl (the specs with their chance secrets: private, mode 0600), run.json (the
    configuration's fingerprint, for `--resume`; referee/resume.py)."""

    def __init__(self, root: str | Path, tid: str) -> None:
        self.path = Path(root) / tid
        self.matches = self.path / "matches.jsonl"
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            # A power loss can leave half a last line: cut it so the next record starts a line.
            resume.cut_partial_line(self.matches)
            self._fh = self.matches.open("a", encoding="utf-8")
        except OSError as exc:
            raise RunFolderError(f"cannot create the run folder {self.path}: {exc.strerror or exc}") from exc

    def append(self, record: MatchRecord) -> None:
        try:
            self._fh.write(record.model_dump_json() + "\n")
            self._fh.flush()
            pgn.observe(self.path, record)  # chess matches also as pgn/<match id>.pgn
        except OSError as exc:
            raise RunFolderError(f"cannot write {self.matches}: {exc.strerror or exc}") from exc

    def write_schedule(self, specs: list[MatchSpec]) -> None:
        path = self.path / "schedule.jsonl"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                for s in specs:
                    fh.write(s.model_dump_json() + "\n")
        except OSError as exc:
            raise RunFolderError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def write_run_info(self, config: TournamentConfig) -> None:
        """`run.json`: the tournament id and its configuration's fingerprint (for `--resume`)."""
        path = self.path / resume.RUN_FILE
        try:
            path.write_text(json.dumps(resume.run_info(config, self.path.name), indent=2), encoding="utf-8")
        except OSError as exc:
            raise RunFolderError(f"cannot write {path}: {exc.strerror or exc}") from exc

    def recorded_ids(self) -> set[str]:
        """The match ids `matches.jsonl` holds a valid record of."""
        return {r.match_id for r in resume.read_records(self.matches)}

    def read_records(self, specs: list[MatchSpec] | None = None) -> list[MatchRecord]:
        """The folder's records (first per match id), in the order of `specs` when given."""
        found = {r.match_id: r for r in resume.read_records(self.matches)}
        if specs is None:
            return list(found.values())
        return [found[s.match_id] for s in specs if s.match_id in found]

    def read_schedule(self) -> list[MatchSpec] | None:
        path = self.path / "schedule.jsonl"
        if not path.exists():
            return None
        return [MatchSpec.model_validate_json(line) for line in path.read_text().splitlines() if line.strip()]

    def rewrite(self, records: list[MatchRecord]) -> None:
        """Replace matches.jsonl with exactly these records (atomically)."""
        tmp = self.matches.with_suffix(".jsonl.tmp")
        try:
            with tmp.open("w", encoding="utf-8") as fh:
                for r in records:
                    fh.write(r.model_dump_json() + "\n")
            os.replace(tmp, self.matches)
        except OSError as exc:
            raise RunFolderError(f"cannot write {self.matches}: {exc.strerror or exc}") from exc

    def write_summary(self, table: list[Standing], rates: list[Rating], extra: dict[str, object]) -> None:
        try:
            (self.path / "standings.json").write_text(
                json.dumps([s.model_dump() for s in table], indent=2), encoding="utf-8"
            )
            (self.path / "ratings.json").write_text(
                json.dumps([r.model_dump() for r in rates], indent=2), encoding="utf-8"
            )
            (self.path / "summary.json").write_text(
                json.dumps(extra, indent=2, default=str), encoding="utf-8"
            )
        except OSError as exc:
            raise RunFolderError(f"cannot write the summary in {self.path}: {exc.strerror or exc}") from exc

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._fh.close()


def summarize(records: list[MatchRecord], config: TournamentConfig) -> tuple[list[Standing], list[Rating]]:
    if config.ratings.split_by == "provenance":
        records = split_by_provenance(records)  # one row per (agent, provenance hash)
    return standings(records, config.ratings.count_provider_faults), ratings(records, config.ratings)
