"""Ratings split by provenance (issue 16): one agent name whose records carry two provenances
(a changed prompt) is one row by default and two rows (`name@hash`) when split, in the run's
summary (`[ratings] split_by`) and in `spielbus standings RUN_DIR --by-provenance`; a bot
restarted with a changed setting has its new provenance in the next record
of the same referee worker (issue 31)."""

from __future__ import annotations

from pathlib import Path

import pytest
from nats.aio.client import Client as NATS

from agents.random_agent import RandomStrategy
from agents.registry import strategy_class
from bus.protocol import FaultRecord, GameSpec, MatchRecord, MoveRecord, Provenance
from referee.config import parse_config
from referee.provenance import provenance_hash, split_by_provenance
from referee.ratings import ratings, standings
from referee.run_folder import summarize
from referee.worker import RefereeWorker
from spielbus import standings as standings_cmd
from tests.helpers import serving, uid
from tests.reliability_helpers import make_specs

OLD = Provenance(agent="llm", kind="llm_policy", version="1", models=["smollm2"], config_hash="aaaa")
NEW = Provenance(agent="llm", kind="llm_policy", version="1", models=["smollm2"], config_hash="bbbb")
RAND = Provenance(agent="rand", kind="random", version="1", config_hash="cccc")


def _records() -> list[MatchRecord]:
    """llm (old prompt) wins 6, llm (new prompt) loses 6 (one by an illegal move) against rand."""
    out = []
    for i in range(12):
        old = i < 6
        seats = ["llm", "rand"] if i % 2 == 0 else ["rand", "llm"]
        me = seats.index("llm")
        ranks = [1, 2] if (me == 0) == old else [2, 1]
        faults = [] if old or i != 7 else [FaultRecord(turn=1, seat=me, agent="llm", reason="illegal")]
        out.append(
            MatchRecord(
                match_id=f"m{i}",
                tournament="t",
                game=GameSpec(name="tic_tac_toe"),
                seats=seats,
                seed=i,
                moves=[
                    MoveRecord(turn=t, player=t % 2, action=t, text=str(t), agent=seats[t % 2])
                    for t in range(3)
                ],
                faults=faults,
                returns=[1.0 if r == 1 else -1.0 for r in ranks],
                outcome="decisive",
                ranks=ranks,
                provenance=[OLD if old else NEW, RAND],
            )
        )
    return out


def test_one_name_two_provenances_are_two_rows_when_split() -> None:
    records = _records()
    merged = {s.agent: s for s in standings(records)}
    assert merged["llm"].played == 12 and merged["llm"].wins == 6

    split = split_by_provenance(records)
    old, new = f"llm@{provenance_hash(OLD)}", f"llm@{provenance_hash(NEW)}"
    assert old != new
    rows = {s.agent: s for s in standings(split)}
    assert set(rows) == {old, new, f"rand@{provenance_hash(RAND)}"}
    assert (rows[old].wins, rows[old].losses) == (6, 0)
    assert (rows[new].wins, rows[new].losses) == (0, 6)
    assert rows[new].faults == {"illegal": 1} and rows[old].faults == {}
    assert rows[new].moves > 0  # moves are relabelled too
    rated = {r.agent: r for r in ratings(split, parse_config(FILE).ratings)}
    assert rated[old].bt > rated[new].bt


def test_the_hash_ignores_the_name_and_the_llm_address_and_a_record_without_provenance_keeps_its_names() -> (
    None
):
    assert provenance_hash(OLD) == provenance_hash(OLD.model_copy(update={"agent": "other"}))
    url = "openai/m@http://127.0.0.1:1/v1"
    here = Provenance.model_validate(
        {"agent": "llm", "kind": "llm_policy", "models": [url], "config_hash": "1", "options_hash": "abc"}
    )
    there = here.model_copy(update={"models": ["openai/m@http://127.0.0.1:2/v1"], "config_hash": "2"})
    assert provenance_hash(here) == provenance_hash(there)
    changed = Provenance.model_validate({**there.model_dump(), "options_hash": "abd"})
    assert provenance_hash(changed) != provenance_hash(here)
    bare = _records()[0].model_copy(update={"provenance": []})
    assert split_by_provenance([bare])[0].seats == bare.seats


FILE = """
[[games]]
name = "tic_tac_toe"
[agents.llm]
kind = "random"
[agents.rand]
kind = "random"
"""


def test_summarize_splits_with_the_ratings_setting() -> None:
    records = _records()
    plain, _ = summarize(records, parse_config(FILE))
    split, rates = summarize(records, parse_config(FILE + '[ratings]\nsplit_by = "provenance"\n'))
    assert len(plain) == 2 and len(split) == 3 and len(rates) == 3


def test_standings_command_by_provenance(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "matches.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in _records()))
    assert standings_cmd.main([str(tmp_path), "--by-provenance"]) == 0
    out = capsys.readouterr().out
    assert f"llm@{provenance_hash(OLD)}"[:8] in out and f"@{provenance_hash(NEW)}"[:6] in out
    assert standings_cmd.main([str(tmp_path)]) == 0
    assert "llm@" not in capsys.readouterr().out
    (tmp_path / "matches.jsonl").write_text("not a record\n")
    assert standings_cmd.main([str(tmp_path)]) == 2
    assert "matches.jsonl:1" in capsys.readouterr().out


def test_a_changed_setting_changes_the_options_hash_and_a_credential_does_not() -> None:
    """What agents put in their service metadata, which the referee hashes into `config_hash`."""
    cls = strategy_class("llm_policy")
    llm = {"base_url": "http://127.0.0.1:9/v1", "model": "m", "api_key": "k1"}
    a = cls.from_options({"mode": "direct", "llm": llm})
    assert a.options_hash() != cls.from_options({"mode": "vote", "llm": llm}).options_hash()
    assert (
        a.options_hash()
        == cls.from_options({"mode": "direct", "llm": {**llm, "api_key": "k2"}}).options_hash()
    )


async def test_an_agent_restarted_with_changed_options_has_its_new_provenance_in_the_next_record(
    nc: NATS,
) -> None:
    """The referee worker asks each seat's `$SRV.INFO` at every match start (referee/worker.py): a
    bot restarted with a changed setting is a new provenance in the next match, under one worker."""
    a, b = uid("prov-a"), uid("prov-b")
    specs = make_specs(uid("prov"), "tic_tac_toe", [[a, b], [b, a]])
    worker = RefereeWorker(nc)

    def options_hash(rec: MatchRecord) -> object:
        return next((p.model_extra or {}).get("options_hash") for p in rec.provenance if p.agent == a)

    async with serving(nc, RandomStrategy.from_options({"seed": 2}), b):
        async with serving(nc, RandomStrategy.from_options({"seed": 1}), a):
            first = await worker.play(specs[0])
        async with serving(nc, RandomStrategy.from_options({"seed": 7}), a):
            second = await worker.play(specs[1])
    assert options_hash(first) and options_hash(second)
    assert options_hash(first) != options_hash(second)
    assert provenance_hash(first.provenance[0]) != provenance_hash(second.provenance[1])
