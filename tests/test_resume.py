"""`spielbus run FILE --resume RUN_DIR` (issue 16) and a collector that keeps no records (issue 10's soak).

The end-to-end test runs a real tournament (embedded nats-server, agents as child processes),
cuts its run folder back as a power loss would (two records and half a third line), resumes
it, and compares the result with the uninterrupted run's, wall-clock fields aside.
"""

from __future__ import annotations

import gc
import json
import shutil
from pathlib import Path

import pytest

from bus.protocol import GameSpec, MatchEvent, MatchRecord, MatchSpec
from referee.collector import Collector
from referee.config import ConfigError, parse_config
from referee.resume import check_resumable, cut_partial_line, read_records
from referee.run_folder import RunFolder
from tests.test_cli import _run

TOURNAMENT = """
name = "{name}"
games_per_pairing = 3
concurrency = 2
deadline_ms = {deadline}
seed = 4
[[games]]
name = "tic_tac_toe"
[agents.ra]
kind = "random"
options = {{ seed = 1 }}
[agents.rb]
kind = "random"
options = {{ seed = 2 }}
"""
GAME = GameSpec(name="tic_tac_toe")
QUIET = ["--quiet", "--web-port", "off", "--metrics-port", "off"]


def _record(mid: str, tid: str = "t") -> MatchRecord:
    return MatchRecord(
        match_id=mid, tournament=tid, game=GameSpec(name="tic_tac_toe"), seats=["a", "b"], seed=1,
        outcome="draw", returns=[0.0, 0.0], ranks=[1, 1],
    )  # fmt: skip


def test_a_cut_off_last_line_is_dropped_and_the_next_record_starts_a_line(tmp_path: Path) -> None:
    path = tmp_path / "matches.jsonl"
    one, two = _record("m1"), _record("m2")
    path.write_text(one.model_dump_json() + "\n" + one.model_dump_json() + "\n" + two.model_dump_json()[:40])
    assert cut_partial_line(path) == 40
    assert [r.match_id for r in read_records(path)] == ["m1"]  # the duplicate is dropped too
    folder = RunFolder(tmp_path, "t")  # opening the folder cuts as well (nothing left to cut here)
    folder.matches.write_text(one.model_dump_json() + '\n{"match_id": "m2", "tourn')
    folder.close()
    folder = RunFolder(tmp_path, "t")
    folder.append(two)
    folder.close()
    assert [r.match_id for r in read_records(folder.matches)] == ["m1", "m2"]


def _folder(tmp_path: Path, text: str) -> Path:
    config = parse_config(text)
    folder = RunFolder(tmp_path, "orig-20260101-000000000-abcdef")
    folder.write_schedule([])
    folder.write_run_info(config)
    folder.close()
    return folder.path


def test_resume_refuses_another_tournament_or_a_changed_file_naming_what_differs(tmp_path: Path) -> None:
    path = _folder(tmp_path, TOURNAMENT.format(name="orig", deadline=300))
    same = parse_config(TOURNAMENT.format(name="orig", deadline=300))
    assert check_resumable(path, same) == path.name
    with pytest.raises(ConfigError, match=r"a changed tournament file; differs in deadline_ms: 300 -> 400"):
        check_resumable(path, parse_config(TOURNAMENT.format(name="orig", deadline=400)))
    with pytest.raises(ConfigError, match=r"another tournament; differs in name: \"orig\" -> \"other\""):
        check_resumable(path, parse_config(TOURNAMENT.format(name="other", deadline=300)))
    (tmp_path / "plain").mkdir()
    with pytest.raises(ConfigError, match="not a resumable run folder"):
        check_resumable(tmp_path / "plain", same)
    # Through the command line: exit 2, with the message, before anything starts.
    cfg = tmp_path / "changed.toml"
    cfg.write_text(TOURNAMENT.format(name="orig", deadline=400).replace("seed = 2", "seed = 9"))
    out = _run(["run", str(cfg), "--resume", str(path), *QUIET])
    assert out.returncode == 2, out.stdout + out.stderr
    text = " ".join(out.stdout.split())
    assert "deadline_ms: 300 -> 400" in text and "agents.rb.options.seed: 2 -> 9" in text, text
    assert "Traceback" not in out.stdout + out.stderr


def test_the_collector_keeps_no_records_when_told_so(tmp_path: Path) -> None:
    """`spielbus run`'s collector writes each record to the folder and keeps only its id: the number
    of live MatchRecord objects does not grow with the matches (before: one per match, in memory)."""
    specs = [
        MatchSpec(match_id=f"t-m{i}", tournament="t", game=GAME, seats=["a", "b"], seed=i) for i in range(300)
    ]
    folder = RunFolder(tmp_path, "t")
    collector = Collector(specs, folder.append, keep=False)

    def live() -> int:
        gc.collect()
        return sum(isinstance(o, MatchRecord) for o in gc.get_objects())

    before = live()
    for i, s in enumerate(specs):
        rec = _record(s.match_id).model_copy(update={"seed": i})
        event = MatchEvent(type="ended", match_id=s.match_id, tournament="t", game=GAME, seats=s.seats,
                           record=rec)  # fmt: skip
        collector.on_event(event, i + 1)
    del rec, event
    folder.close()
    assert collector.done.is_set() and len(collector.recorded) == 300
    assert live() - before <= 1  # none kept (a reference may linger in the last event's frame)
    assert len(folder.read_records(specs)) == 300


def _essence(rec: dict) -> tuple:
    """What a record says about the match, without its wall-clock fields (times, latencies)."""
    return (
        rec["match_id"], rec["seats"], rec["seed"], rec["secret"],
        rec["outcome"], rec["returns"], rec["ranks"],
        [(m["turn"], m["player"], m["action"], m["agent"]) for m in rec["moves"]],
        [(f["seat"], f["reason"]) for f in rec["faults"]],
    )  # fmt: skip


@pytest.mark.slow
def test_a_resumed_run_equals_the_uninterrupted_one(tmp_path: Path) -> None:
    cfg = tmp_path / "t.toml"
    cfg.write_text(TOURNAMENT.format(name="resume", deadline=5000))
    out = _run(["run", str(cfg), "--run-dir", str(tmp_path / "full"), *QUIET])
    assert out.returncode == 0, out.stdout + out.stderr
    (full,) = (tmp_path / "full").iterdir()
    lines = (full / "matches.jsonl").read_text().splitlines()
    assert len(lines) == 6
    # A power loss after two matches: two records and half of the third line.
    cut = tmp_path / "cut" / full.name
    shutil.copytree(full, cut)
    (cut / "matches.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:100])
    out = _run(["run", str(cfg), "--resume", str(cut), *QUIET])
    assert out.returncode == 0, out.stdout + out.stderr
    assert "2 of 6 matches recorded; playing the other 4" in " ".join(out.stdout.split())
    again = (cut / "matches.jsonl").read_text().splitlines()
    assert again[:2] == lines[:2] and len(again) == 6  # the two kept as they were; the rest played once
    by_id = {json.loads(x)["match_id"]: _essence(json.loads(x)) for x in lines}
    assert {json.loads(x)["match_id"]: _essence(json.loads(x)) for x in again} == by_id
    for name in ("standings.json", "ratings.json"):
        assert json.loads((cut / name).read_text()) == json.loads((full / name).read_text()), name
    assert json.loads((cut / "summary.json").read_text())["resumed"] == 2


SPRT = """
name = "sprt-resume"
format = "sprt"
concurrency = 2
deadline_ms = 5000
seed = 3
[sprt]
elo0 = 0
elo1 = 50
max_pairs = 60
in_flight = 1
[[games]]
name = "tic_tac_toe"
[agents.mcts]
kind = "mcts"
options = { simulations = 40, rollouts = 1, seed = 1 }
[agents.rand]
kind = "random"
options = { seed = 2 }
"""


@pytest.mark.slow
def test_a_resumed_sprt_run_counts_the_pairs_it_has_and_stops_where_the_whole_run_did(
    tmp_path: Path,
) -> None:
    """One pair in flight at a time and seeded agents: the uninterrupted run decides after a fixed
    number of pairs. Cut back to its first pair plus half a match, the resumed run counts that pair,
    plays the rest of the schedule in order and stops at the same pair with the same decision."""
    cfg = tmp_path / "s.toml"
    cfg.write_text(SPRT)
    out = _run(["run", str(cfg), "--run-dir", str(tmp_path / "full"), *QUIET])
    assert out.returncode == 0, out.stdout + out.stderr
    (full,) = (tmp_path / "full").iterdir()
    lines = (full / "matches.jsonl").read_text().splitlines()
    whole = json.loads((full / "summary.json").read_text())["sprt"]
    assert whole["decision"] != "continue" and len(lines) >= 4 and len(lines) % 2 == 0
    cut = tmp_path / "cut" / full.name
    shutil.copytree(full, cut)
    (cut / "matches.jsonl").write_text(lines[0] + "\n" + lines[1] + "\n" + lines[2][:100])
    out = _run(["run", str(cfg), "--resume", str(cut), *QUIET])
    assert out.returncode == 0, out.stdout + out.stderr
    again = (cut / "matches.jsonl").read_text().splitlines()
    assert again[:2] == lines[:2]
    by_id = {json.loads(x)["match_id"]: _essence(json.loads(x)) for x in lines}
    assert {json.loads(x)["match_id"]: _essence(json.loads(x)) for x in again} == by_id
    resumed = json.loads((cut / "summary.json").read_text())["sprt"]
    assert resumed == whole
