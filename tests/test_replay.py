"""Exact replay: the recording of LLM attempts, its checks, and `spielbus replay` against the real model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from agents.llm.base import BackendReply, LLMTimeout, LLMUnavailable
from agents.llm.recording import (
    INDEX,
    NotRecorded,
    RecordingError,
    Tape,
    TimeSpent,
    request_key,
    response_sha,
    verify_recording,
)
from agents.llm.strategy import Budget
from agents.llm_policy import LLMPolicyStrategy
from bus.protocol import GameSpec, MatchRecord, MatchSpec, Provenance
from spielbus import replay
from tests.llm_fixtures import llm_server  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]


def _request(text: str) -> dict[str, object]:
    return {"backend": "openai", "structured": "off", "model": "m", "messages": [["user", text]],
            "temperature": 0.0, "max_tokens": 8, "seed": 1, "top_p": None, "n": 1, "schema": None,
            "extra": {}}  # fmt: skip


def _recorded(folder: Path) -> None:
    a = Tape(folder, replay=False, tag="a-0")
    a.record(_request("one"), LLMTimeout("no answer within 2.0s"))
    a.record(_request("one"), BackendReply(["x"], 5, 1))
    a.record(_request("one"), TimeSpent("the turn's time budget is spent"))
    Tape(folder, replay=False, tag="b-0").record(_request("one"), BackendReply(["y"], 5, 1))
    a.record(_request("two"), BackendReply(["z"], 7, 2))


def test_tape_plays_back_each_agents_outcomes_in_order(tmp_path: Path) -> None:
    _recorded(tmp_path)
    assert verify_recording(tmp_path) == 5
    a = Tape(tmp_path, replay=True, tag="a-0", misses=str(tmp_path / "misses.jsonl"))
    first, second, third = (a.play(_request("one")) for _ in range(3))
    assert isinstance(first, LLMTimeout) and str(first) == "no answer within 2.0s"
    assert isinstance(second, BackendReply) and second.texts == ["x"]
    assert isinstance(third, TimeSpent)
    b = Tape(tmp_path, replay=True, tag="b-0")
    reply = b.play(_request("one"))
    assert isinstance(reply, BackendReply) and reply.texts == ["y"]  # b's own answer, not a's
    with pytest.raises(NotRecorded, match="not in the recording") as diverged:
        a.play(_request("a changed prompt"))
    # A divergence is not the provider's failure: that would void the match and replay it, waiting.
    assert not isinstance(diverged.value, LLMUnavailable)
    (miss,) = [json.loads(line) for line in (tmp_path / "misses.jsonl").read_text().splitlines()]
    assert miss["key"] == request_key(_request("a changed prompt"))
    assert miss["last_message"] == "a changed prompt" and miss["agent"] == "a-0"


def test_clock_checks_replay_in_order(tmp_path: Path) -> None:
    """A search cut by its deadline is cut at the same step in a replay, however fast the answers."""
    Tape(tmp_path, replay=False, tag="a-0").record_clock("m-1", 3, [False, False, True])
    with (tmp_path / "clock-a-0.jsonl").open("a") as f:
        f.write('{"match_id": "m-1", "turn": 4, "spent": "yes"}\n')  # damaged: not replayed
    tape = Tape(tmp_path, replay=True, tag="a-0")
    budget = Budget(deadline=time.monotonic() + 3600, hard=time.monotonic() + 3600)
    budget.script = tape.clock("m-1", 3)
    assert [budget.spent() for _ in range(4)] == [False, False, True, False]  # then the live clock
    assert tape.clock("m-1", 4) is None and Tape(tmp_path, replay=True, tag="b-0").clock("m-1", 3) is None


def test_verify_names_the_first_missing_or_damaged_response(tmp_path: Path) -> None:
    _recorded(tmp_path)
    one, two = request_key(_request("one")), request_key(_request("two"))
    doc = json.loads((tmp_path / f"{two}.json").read_text())
    doc["responses"][0]["texts"] = ["tampered"]
    (tmp_path / f"{two}.json").write_text(json.dumps(doc))
    with pytest.raises(RecordingError, match=f"missing response {two}#0 .*does not match its hash"):
        verify_recording(tmp_path)
    (tmp_path / f"{one}.json").unlink()
    with pytest.raises(RecordingError, match=f"missing response {one}#0 .*does not exist"):
        verify_recording(tmp_path)
    (tmp_path / f"{one}.json").write_text("{not json")
    with pytest.raises(RecordingError, match=f"missing response {one}#0 .*damaged"):
        verify_recording(tmp_path)


def _run_folder(path: Path) -> Path:
    """A run folder as `spielbus run` leaves it (no bus needed: the recording is checked first)."""
    path.mkdir()
    (path / "tournament.toml").write_text(
        'name = "t"\n[[games]]\nname = "tic_tac_toe"\n[agents.a]\nkind = "random"\n'
    )
    spec = MatchSpec(match_id="t-1-00000", tournament="t-1", game=GameSpec(name="tic_tac_toe"),
                     seats=["a", "a"], seed=1, secret="s")  # fmt: skip
    (path / "schedule.jsonl").write_text(spec.model_dump_json() + "\n")
    rec = MatchRecord(match_id=spec.match_id, tournament="t-1", game=spec.game, seats=spec.seats, seed=1)
    (path / "matches.jsonl").write_text(rec.model_dump_json() + "\n")
    _recorded(path / "llm")
    return path


def test_replay_stops_on_a_missing_response(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path / "run")
    key = request_key(_request("two"))
    (run / "llm" / f"{key}.json").unlink()
    assert replay.main([str(run)]) == 1
    err = capsys.readouterr().err
    assert f"missing response {key}#0" in err and f"{INDEX}:5" in err
    assert not (run / "replay").exists()  # nothing was played


def test_replay_refuses_a_run_recorded_by_another_strategy_version(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # llm_policy 1 laid its prompts out otherwise (issue 32): none of its recorded requests would be
    # asked again, so the replay names the agent instead of diverging from the first LLM move.
    run = _run_folder(tmp_path / "run")
    rec = MatchRecord.model_validate_json((run / "matches.jsonl").read_text())
    old = Provenance(agent="a", kind="llm_policy", version="1", models=["smollm2"], config_hash="x")
    (run / "matches.jsonl").write_text(rec.model_copy(update={"provenance": [old]}).model_dump_json() + "\n")
    assert replay.main([str(run)]) == 1
    here = LLMPolicyStrategy.version
    assert f"agent 'a' (llm_policy): version 1 recorded, {here} here" in capsys.readouterr().err
    assert not (run / "replay").exists()  # nothing was played
    current = old.model_copy(update={"version": here})
    assert replay.changed_versions([rec.model_copy(update={"provenance": [current]})]) == []


def test_replay_refuses_a_bad_run_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run_folder(tmp_path / "run")
    (run / "schedule.jsonl").write_text('{"match_id": 3}\n')
    assert replay.main([str(run)]) == 2
    assert "schedule.jsonl:1: not a MatchSpec" in capsys.readouterr().err
    assert replay.main([str(tmp_path / "nowhere")]) == 2


def _outcome(run: Path, entry: dict[str, Any]) -> Any:
    return json.loads((run / "llm" / f"{entry['key']}.json").read_text())["responses"][entry["i"]]


def _spielbus(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "COLUMNS": "200"}  # wide tables: agent names stay on one line
    return subprocess.run([sys.executable, "-m", "spielbus.cli", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=900, env=env)  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(1200)  # the real model on a shared 2-core machine: minutes, not seconds
def test_record_then_replay_with_the_real_model(tmp_path: Path, llm_server) -> None:  # noqa: F811
    cfg = tmp_path / "t.toml"
    cfg.write_text(
        # allow_fallbacks: a fallback is recorded and replayed like any answer; on a loaded machine
        # one timed-out request would otherwise fail the run (5% threshold) before the replay.
        'name = "rec"\ngames_per_pairing = 1\nboth_seat_orders = false\nseed = 3\ndeadline_ms = 60000\n'
        "allow_fallbacks = true\n"
        '[[games]]\nname = "tic_tac_toe"\n'
        f'[llm.local]\nbackend = "openai"\nbase_url = "{llm_server.base_url}"\nmodel = "smollm2"\n'
        '[agents.rnd]\nkind = "random"\noptions = { seed = 5 }\n'
        '[agents.llm]\nkind = "llm_policy"\nllm = "local"\noptions = { seed = 1 }\n'
    )
    out = _spielbus("run", str(cfg), "--run-dir", str(tmp_path / "runs"), "--quiet",
                    "--metrics-port", "off", "--web-port", "off")  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    (run,) = (tmp_path / "runs").glob("rec-*")
    recorded = verify_recording(run / "llm")
    assert recorded >= 3  # at least the LLM's moves of one tic-tac-toe game
    original = [MatchRecord.model_validate_json(x) for x in (run / "matches.jsonl").open()]
    # The LLM layer's own count travels beside the strategy's report (referee/budget.py charges it).
    answered = [(m.usage, m.stats) for r in original for m in r.moves if m.usage and m.usage.llm_calls]
    assert answered
    for usage, stats in answered:
        assert stats is not None and stats.model_dump()["metered"] == usage.model_dump()

    out = _spielbus("replay", str(run), "--quiet")
    text = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 0, text[-3000:]
    assert f"{recorded} recorded LLM responses, 1 of 1 records identical" in text
    again = [
        MatchRecord.model_validate_json(x) for x in next((run / "replay").glob("rec-*/matches.jsonl")).open()
    ]
    assert sorted(map(replay.record_hash, again)) == sorted(map(replay.record_hash, original))

    # Re-scoring under other rating settings plays nothing and asks no LLM.
    other = tmp_path / "other.toml"
    other.write_text(cfg.read_text() + "[ratings]\nelo_k = 0.5\n")
    out = _spielbus("replay", str(run), "--rescore", "--config", str(other), "--by-budget")
    assert out.returncode == 0 and "llm (unlimited)" in out.stdout, out.stdout[-2000:] + out.stderr[-2000:]

    # A changed answer (its index entry updated, so the recording is consistent): the replay names
    # the first match and move that differ.
    index = (run / "llm" / INDEX).read_text().splitlines()
    entries = [json.loads(line) for line in index]
    # The first answer (not a recorded error) in the recording.
    n = next(i for i, e in enumerate(entries) if "texts" in _outcome(run, e))
    entry = entries[n]
    path = run / "llm" / f"{entry['key']}.json"
    doc = json.loads(path.read_text())
    reply = doc["responses"][entry["i"]]
    reply["texts"] = ["I resign"]
    path.write_text(json.dumps(doc))
    index[n] = json.dumps({**entry, "sha": response_sha(reply)})
    (run / "llm" / INDEX).write_text("\n".join(index) + "\n")
    out = _spielbus("replay", str(run), "--quiet", "--out", str(tmp_path / "replay2"))
    text = " ".join((out.stdout + out.stderr).split())
    assert out.returncode == 1, text[-3000:]
    assert re.search(r"first divergence: match rec-\S+-00000: move \d+ \(turn \d+\)", text), text[-3000:]
