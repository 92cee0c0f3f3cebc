"""Collusion made visible (referee/ladder/audit.py, `spielbus ladder audit`, issue 41): seeded
sybils who throw games to each other among honest accounts are the one flagged pairing, with a
tiny p-value, and the thrower is listed as forfeiting to one opponent only; no honest pairing is
flagged. Against a real nats-server: the command reads the ladder's bucket, and an operator's
bench by account holds in a running ladder."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import random

import pytest

from agents.random_agent import RandomStrategy
from bus.connect import connect
from bus.identity import entry_name
from referee.ladder.audit import audit, binomial_two_sided
from referee.ladder.service import Ladder
from referee.ladder.store import LadderResult, LadderStore
from spielbus.ladder import main as ladder_cli
from tests.helpers import serving, uid, until
from tests.test_ladder_service import _config, referee, running


def test_exact_binomial() -> None:
    assert binomial_two_sided(0, 10, 0.5) == pytest.approx(2 / 1024)
    assert binomial_two_sided(5, 10, 0.5) == pytest.approx(1.0)
    assert binomial_two_sided(3, 10, 0.3) == pytest.approx(1.0)  # the mode: nothing is less likely
    assert binomial_two_sided(2, 10, 0.5) == pytest.approx(112 / 1024)  # scipy.stats.binomtest agrees


def seeded_ladder(seed: int = 0, rounds: int = 40, thrown: int = 30) -> list[LadderResult]:
    """Six honest accounts and two sybils of middling strength; every honest pairing meets
    `rounds` times; sybil `s1` throws all of its `thrown` games to `s2` (a forfeit by fault), and
    both play the field honestly. Entries are `name@hash`, two per account (options changed)."""
    rng = random.Random(seed)
    strength = {"h0": -1.0, "h1": -0.5, "h2": 0.0, "h3": 0.3, "h4": 0.6, "h5": 1.0, "s1": 0.1, "s2": 0.2}
    names = sorted(strength)
    out = []
    i = 0
    for a_i, a in enumerate(names):
        for b in names[a_i + 1 :]:
            sybils = {a, b} == {"s1", "s2"}
            for k in range(thrown if sybils else rounds):
                i += 1
                ea, eb = f"{a}@{k % 2}", f"{b}@{k % 2}"
                if sybils:
                    score = 0.0 if a == "s1" else 1.0
                    faults = {f"s1@{k % 2}": "timeout"}
                else:
                    p = 1 / (1 + math.exp(strength[b] - strength[a]))
                    score = 1.0 if rng.random() < p else 0.0
                    faults = {}
                out.append(
                    LadderResult(match_id=f"m{i}", first=ea, second=eb, score=score, game="g", faults=faults)
                )
    return out


def test_sybils_flagged_honest_pairs_not() -> None:
    report = audit(seeded_ladder(), entry_name, alpha=0.01, min_games=10)
    flagged = [(p.first, p.second) for p in report.pairs if p.flagged]
    assert flagged == [("s1", "s2")]
    top = report.pairs[0]
    assert top.score == 0 and top.expected > 10 and top.p_value < 1e-4
    assert report.pairs_tested == 28  # every pair of 8 accounts, their entries pooled
    assert [(f.account, f.opponent, f.forfeits) for f in report.forfeits] == [("s1", "s2", 30)]
    # Several seeds: no honest pairing is ever flagged.
    for seed in range(1, 6):
        r = audit(seeded_ladder(seed), entry_name)
        assert [(p.first, p.second) for p in r.pairs if p.flagged] == [("s1", "s2")]


async def test_audit_command_reads_the_bucket(nats_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    bucket = uid("LAUDIT").replace("-", "_")
    nc = await connect(nats_url, name="ladder-audit")
    try:
        store = await LadderStore.open(nc.jetstream(), bucket)
        await asyncio.gather(*(store.record(r) for r in seeded_ladder()))
    finally:
        await nc.drain()
    code = await asyncio.to_thread(ladder_cli, ["audit", "--nats", nats_url, "--bucket", bucket, "--json"])
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert [(p["first"], p["second"]) for p in report["pairs"] if p["flagged"]] == [("agent-s1", "agent-s2")]
    assert report["forfeits"][0]["account"] == "agent-s1"
    code = await asyncio.to_thread(ladder_cli, ["audit", "--nats", nats_url, "--bucket", bucket])
    assert code == 0 and "FLAGGED" in capsys.readouterr().out


async def test_operator_benches_an_account_in_a_running_ladder(nats_url: str) -> None:
    a, b, c = uid("ba"), uid("bb"), uid("bc")
    cfg = _config([a, b, c])
    nc = await connect(nats_url, name="ladder-bench")

    def bench(*args: str) -> int:
        return ladder_cli(["bench", f"agent-{c}", "--nats", nats_url, "--bucket", cfg.bucket, *args])

    try:
        async with contextlib.AsyncExitStack() as stack:
            await stack.enter_async_context(referee(nc))
            for i, name in enumerate((a, b, c)):
                await stack.enter_async_context(serving(nc, RandomStrategy.from_options({"seed": i}), name))
            async with running(nc, Ladder(nc, cfg)) as ladder:
                await until(lambda: len(ladder.results) >= 2, "two results", 120)
                assert await asyncio.to_thread(bench, "--hours", "2", "--reason", "sybil of bb") == 0
                await until(lambda: f"agent-{c}" in ladder.quarantine.benched(ladder.clock()), "benched", 60)
                await until(lambda: all(c not in p.spec.seats for p in ladder.pending.values()), "c done", 60)
                n = ladder.scheduled
                await until(lambda: ladder.scheduled >= n + 3, "more matches", 120)
                assert all(c not in p.spec.seats for p in ladder.pending.values())
                rows = ladder.leaderboard()["rows"] + ladder.leaderboard()["unrated"]
                assert {r["benched"] for r in rows if r["entry"].startswith(c + "@")} == {"sybil of bb"}
                assert await asyncio.to_thread(bench, "--hours", "0") == 0  # lifted
                await until(lambda: any(c in p.spec.seats for p in ladder.pending.values()), "c again", 120)
    finally:
        await nc.drain()


def test_a_long_honest_series_with_little_evidence_against_the_field_is_not_flagged() -> None:
    # Measured on a live ladder (/tmp rotate run, docs/ladder.md): two random bots, 444 games
    # against each other, 3 against anyone else. Their p was barely known, so no flag.
    rs = [
        LadderResult(match_id=f"m{i}", first="g1@a", second="g2@b", score=1.0 if i < 227 else 0.0, game="g")
        for i in range(444)
    ]
    rs += [
        LadderResult(match_id=f"x{i}", first=f"{w}@a", second="bad@c", score=1.0, game="g")
        for i, w in enumerate(["g1", "g1", "g2"])
    ]
    report = audit(rs, entry_name)
    assert report.pairs_tested == 1 and not report.pairs[0].flagged
    # The same series with the field well measured (four references, 100 games each, level with
    # both): 227 of 444 is unremarkable there too, and 300 of 444 is flagged.
    field = [
        LadderResult(match_id=f"f{w}{r}{i}", first=f"{w}@a", second=f"{r}@r", score=float(i % 2), game="g")
        for w in ("g1", "g2")
        for r in ("r1", "r2", "r3", "r4")
        for i in range(100)
    ]
    skewed = [r.model_copy(update={"score": 1.0 if i < 300 else 0.0}) for i, r in enumerate(rs[:444])]
    assert not any(p.flagged for p in audit(rs[:444] + field, entry_name).pairs)
    assert [(p.first, p.second) for p in audit(skewed + field, entry_name).pairs if p.flagged] == [
        ("g1", "g2")
    ]
