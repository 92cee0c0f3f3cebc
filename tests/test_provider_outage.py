"""A 60-second outage of one LLM endpoint mid-tournament is not the model's play (issue 38, point 3):
with `[policy] provider = "void"` (the default), a run through the outage ends with the same records
(every move), standings and ratings as the same run without it; the voids are counted apart.

Real processes: a real nats-server (the session's), `spielbus run` as a child process (its referee,
its agent processes), and the OpenAI-compatible HTTP stand-in (tests/llm_standins.py) answering
from the prompt alone (`answer_for`), so seeded agents ask and get the same things in both runs,
and answering every request 503 for 60 s once the outage starts."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bus.protocol import MatchRecord
from tests.helpers import ROOT, uid
from tests.llm_standins import OpenAIStandIn, Scene, answer_for

OUTAGE_S = 60.0
DROP = {"provider_faults", "voided"}  # the outage's own columns: counted apart, they must differ


def _toml(url: str) -> str:
    return (
        'name = "outage"\ngames_per_pairing = 2\nseed = 5\ndeadline_ms = 4000\nconcurrency = 2\n'
        "[policy]\nprovider_wait_s = 5.0\nprovider_retries = 8\n"
        '[[games]]\nname = "tic_tac_toe"\n'
        # No response cache: a replay would take the voided play's answers from it, the same moves
        # counted as cache hits instead of LLM calls (the standings' calls per move would differ).
        f'[llm.hosted]\nbackend = "openai"\nbase_url = "{url}"\nmodel = "standin"\ncache = false\n'
        '[agents.llm]\nkind = "llm_policy"\nllm = "hosted"\noptions = { seed = 3 }\n'
        '[agents.rnd]\nkind = "random"\noptions = { seed = 4 }\n'
        '[agents.rnd2]\nkind = "random"\noptions = { seed = 6 }\n'
    )


async def _run(tmp: Path, nats_url: str, standin: OpenAIStandIn) -> tuple[int, str, Path]:
    url = await standin.start()
    tmp.mkdir(parents=True, exist_ok=True)
    cfg = tmp / "t.toml"
    cfg.write_text(_toml(url))
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "spielbus.cli", "run", str(cfg), "--run-dir", str(tmp / "runs"),
        "--nats", nats_url, "--prefix", uid("outage").replace("-", "_"), "--quiet",
        "--metrics-port", "off", "--web-port", "off",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), 900)
    finally:
        if proc.returncode is None:
            proc.kill()
        await standin.stop()
    (folder,) = (tmp / "runs").glob("outage-*")
    return proc.returncode or 0, out.decode(errors="replace"), folder


def _records(folder: Path) -> dict[str, MatchRecord]:
    lines = (folder / "matches.jsonl").read_text().splitlines()
    recs = [MatchRecord.model_validate_json(line) for line in lines]
    return {r.match_id.rsplit("-", 1)[1]: r for r in recs}  # by place in the schedule


def _play(rec: MatchRecord) -> dict[str, Any]:
    return {
        "moves": [(m.turn, m.player, m.action, m.text, m.agent, m.forced) for m in rec.moves],
        "faults": [(f.turn, f.agent, f.reason) for f in rec.faults],
        "outcome": rec.outcome,
        "returns": rec.returns,
    }  # not the secret: each run draws its own (the unit test checks a replay keeps it)


def _standings(folder: Path) -> dict[str, dict[str, Any]]:
    rows = json.loads((folder / "standings.json").read_text())
    return {r["agent"]: {k: v for k, v in r.items() if k not in DROP} for r in rows}


@pytest.mark.slow
async def test_a_minute_of_outage_changes_no_record_standing_or_rating(tmp_path: Path, nats_url: str) -> None:
    clean_api = OpenAIStandIn()
    clean_api.default = Scene(content=answer_for)
    code, out, clean = await _run(tmp_path / "clean", nats_url, clean_api)
    assert code == 0, out[-3000:]
    assert clean_api.answered > 6, "the LLM agent must have played through its endpoint"

    outage_api = OpenAIStandIn()
    outage_api.default = Scene(content=answer_for)
    outage_api.outage(after=len(clean_api.requests) // 3, seconds=OUTAGE_S)  # mid-tournament
    code, out, through = await _run(tmp_path / "outage", nats_url, outage_api)
    assert code == 0, out[-3000:]
    assert outage_api.outage_refused > 0 and outage_api.outage_over, "the outage happened and ended"

    before, after = _records(clean), _records(through)
    assert sorted(before) == sorted(after)
    for place in before:
        assert _play(after[place]) == _play(before[place]), f"match {place} differs"
    voids = [v for r in after.values() for v in (r.voided or [])]
    assert voids and all(v.agent == "llm" for v in voids), "the outage voided plays of the LLM agent"
    assert all(not (r.voided or []) for r in before.values())

    assert _standings(through) == _standings(clean)
    rows = {r["agent"]: r for r in json.loads((through / "standings.json").read_text())}
    assert rows["llm"]["voided"] == len(voids) and rows["llm"]["provider_faults"] == len(voids)
    assert json.loads((through / "ratings.json").read_text()) == json.loads(
        (clean / "ratings.json").read_text()
    )
