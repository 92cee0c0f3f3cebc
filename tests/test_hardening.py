"""Smaller hardening findings, each pinned: word lists from allowed folders only and of bounded
size, names checked before they become subjects, tournament ids that never collide, the nats-py
guard against CR/LF injection that `pyproject.toml` now requires, `--log-level` before `agent`."""

from __future__ import annotations

import gzip
import subprocess
import sys
from pathlib import Path

import nats.errors
import pytest
from pydantic import ValidationError

from bus.protocol import FaultPolicy, GameSpec, MatchSpec
from games.word import wordlists
from games.word.wordlists import WordListError, load_words
from referee.config import TournamentConfig
from referee.run_folder import tournament_id

ROOT = Path(__file__).resolve().parents[1]


def _list(folder: Path, name: str, words: list[str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("\n".join(words) + "\n", encoding="utf-8")
    return path


def test_a_word_list_outside_the_allowed_folders_is_refused(tmp_path: Path, monkeypatch) -> None:
    allowed = tmp_path / "lists"
    inside = _list(allowed, "ok.txt", ["apple", "pear"])
    outside = _list(tmp_path / "elsewhere", "secret.txt", ["hidden"])
    (allowed / "escape.txt").symlink_to(outside)
    monkeypatch.setenv("SPIELBUS_WORDS_DIRS", str(allowed))
    assert load_words(str(inside)) == ("apple", "pear")
    with pytest.raises(WordListError, match="not inside a folder of \\$SPIELBUS_WORDS_DIRS"):
        load_words(str(outside))
    with pytest.raises(WordListError, match="not inside"):
        load_words(str(allowed / "escape.txt"))  # a symlink out of the folder is followed, then refused
    with pytest.raises(WordListError, match="not inside"):
        load_words("/etc/hostname")
    monkeypatch.delenv("SPIELBUS_WORDS_DIRS")
    with pytest.raises(WordListError, match="SPIELBUS_WORDS_DIRS, which is not set"):
        load_words(str(tmp_path / "lists" / "other.txt"))
    assert len(load_words("scowl70")) > 50_000  # shipped lists need no folder


def test_a_word_list_of_any_size_is_refused(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SPIELBUS_WORDS_DIRS", str(tmp_path))
    monkeypatch.setattr(wordlists, "MAX_LIST_BYTES", 1000)
    big = _list(tmp_path, "big.txt", ["word"] * 300)
    with pytest.raises(WordListError, match="larger than 1000 bytes"):
        load_words(str(big))
    bomb = tmp_path / "bomb.txt.gz"
    bomb.write_bytes(gzip.compress(b"a\n" * 100_000))  # a few hundred bytes on disk
    assert bomb.stat().st_size < 1000
    with pytest.raises(WordListError, match="decompresses to more than 1000 bytes"):
        load_words(str(bomb))


def test_seat_names_are_checked_before_they_become_subjects() -> None:
    base = {"match_id": "m1", "tournament": "t1", "game": GameSpec(name="tic_tac_toe"), "seed": 1}
    MatchSpec(seats=["alice", "bob-2"], **base)
    for bad in ["a.b", "a b", "a*", ">", "x\r\nPUB evil 0", ""]:
        with pytest.raises(ValidationError, match="seat name"):
            MatchSpec(seats=["alice", bad], **base)
    with pytest.raises(ValidationError, match="match_id"):
        MatchSpec(seats=["a", "b"], **{**base, "match_id": "m.1"})
    assert FaultPolicy().kind == "forfeit"


def test_agent_name_is_checked_at_start_with_exit_2() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "agent", "random", "--name", "a.b", "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 2 and "agent name 'a.b'" in out.stderr


def test_tournament_ids_do_not_collide_within_one_second() -> None:
    config = TournamentConfig.model_validate(
        {
            "name": "t",
            "games": [{"name": "tic_tac_toe"}],
            "agents": {"a": {"kind": "random"}, "b": {"kind": "random"}},
        }
    )
    now = 1_800_000_000.25
    ids = {tournament_id(config, now) for _ in range(200)}
    assert len(ids) == 200
    assert all(i.startswith("t-") and ".250" not in i for i in ids)


async def test_nats_client_refuses_crlf_in_subjects(nc) -> None:
    with pytest.raises(nats.errors.BadSubjectError):
        await nc.publish("spielbus.turn.x\r\nPUB spielbus.match.m.ended 2\r\n{}", b"")
    with pytest.raises(nats.errors.BadSubjectError):
        await nc.subscribe("spielbus.turn.x\r\nSUB >")
    pinned = (ROOT / "pyproject.toml").read_text()
    assert '"nats-py==2.16.0"' in pinned  # at least 2.16 (the CR/LF refusal); exactly the one measured


def test_log_level_before_agent_is_passed_on() -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "spielbus.cli",
            "--log-level",
            "DEBUG",
            "agent",
            "random",
            "--name",
            "a",
            "--check",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
