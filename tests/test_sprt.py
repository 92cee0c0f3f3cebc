"""SPRT head-to-head (issue 16): the pentanomial log-likelihood ratio against fastchess's published
test values and against an independent computation (numeric constrained maximisation with scipy),
the parameter faults (exit 2 naming the key), the paired schedule, and one real run that stops as
soon as the test decides, with every match it submitted recorded."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy.optimize import minimize  # type: ignore[import-untyped]  # scipy (via open-spiel) has no stubs

from bus.protocol import GameSpec, MatchRecord
from referee.config import ConfigError, parse_config
from referee.schedule import build_schedule
from referee.sprt import (
    NELO_SCALE,
    PAIR_SCORES,
    Pentanomial,
    SprtConfig,
    bounds,
    elo_estimate,
    elo_to_score,
    llr,
    status,
    status_of_records,
)
from spielbus import standings as standings_cmd

ROOT = Path(__file__).resolve().parents[1]

# fastchess app/tests/sprt_test.cpp: Stats(LL, LD, WL, DD, WD, WW), elo0, elo1, model, LLR
# (github.com/Disservin/fastchess; the values are checked there to 1%).
FASTCHESS = [
    ((365, 16618, 36029, 200, 16974, 390), 0.0, 2.0, "normalized", 2.25),
    ((127, 4883, 10311, 401, 5150, 104), -1.75, 0.25, "normalized", 3.01),
    ((0, 0, 0, 0, 0, 5550), 0.0, 5.0, "normalized", 111.82),
    ((223, 9863, 20279, 1000, 10037, 246), 0.5, 2.5, "logistic", -3.07),
    ((871, 26175, 55003, 980, 26678, 821), 0.0, 2.0, "logistic", -4.98),
]


@pytest.mark.parametrize(("stats", "elo0", "elo1", "model", "want"), FASTCHESS)
def test_llr_matches_fastchess_published_values(
    stats: tuple[int, ...], elo0: float, elo1: float, model: str, want: float
) -> None:
    ll, ld, wl, dd, wd, ww = stats
    got = llr(Pentanomial(ll, ld, wl + dd, wd, ww), elo0, elo1, model)
    assert got == pytest.approx(want, rel=0.01)


def _constrained_loglik(phat: np.ndarray, constraint: str, value: float) -> float:
    """max_p sum phat log p over distributions p with the hypothesis' constraint, by SLSQP:
    written without the Lagrangian tilting referee/sprt.py uses."""
    a = np.array(PAIR_SCORES)

    def mean_sd(p: np.ndarray) -> tuple[float, float]:
        mu = float(p @ a)
        return mu, math.sqrt(max(float(p @ (a - mu) ** 2), 1e-18))

    def con(p: np.ndarray) -> float:
        mu, sd = mean_sd(p)
        return (mu - 0.5) / sd - value if constraint == "t" else mu - value

    res = minimize(
        lambda p: -float(phat @ np.log(np.clip(p, 1e-300, None))),
        x0=phat.copy(),
        method="SLSQP",
        bounds=[(1e-12, 1.0)] * 5,
        constraints=[{"type": "eq", "fun": lambda p: float(p.sum() - 1)}, {"type": "eq", "fun": con}],
        options={"ftol": 1e-15, "maxiter": 1000},
    )
    assert res.success, res.message
    return -float(res.fun)


@pytest.mark.parametrize(
    ("counts", "elo0", "elo1", "model"),
    [
        ((3, 10, 30, 12, 5), 0.0, 10.0, "normalized"),
        ((0, 2, 9, 6, 3), -5.0, 20.0, "normalized"),
        ((1, 2, 3, 2, 1), 0.0, 300.0, "normalized"),  # a first linearization that is infeasible
        ((0, 0, 5, 2, 8), 0.0, 1000.0, "normalized"),
        ((1, 4, 7, 4, 1), 0.0, 50.0, "logistic"),
        ((5, 25, 40, 20, 10), -10.0, 5.0, "logistic"),
    ],
)
def test_llr_agrees_with_numeric_maximisation(
    counts: tuple[int, ...], elo0: float, elo1: float, model: str
) -> None:
    penta = Pentanomial(*counts)
    reg = np.array([c if c else 1e-3 for c in counts], dtype=float)
    n, phat = reg.sum(), reg / reg.sum()
    if model == "normalized":
        l0 = _constrained_loglik(phat, "t", math.sqrt(2) * elo0 / NELO_SCALE)
        l1 = _constrained_loglik(phat, "t", math.sqrt(2) * elo1 / NELO_SCALE)
    else:
        l0 = _constrained_loglik(phat, "mu", elo_to_score(elo0))
        l1 = _constrained_loglik(phat, "mu", elo_to_score(elo1))
    assert llr(penta, elo0, elo1, model) == pytest.approx(n * (l1 - l0), abs=2e-3, rel=1e-3)


def test_bounds_decision_and_estimate() -> None:
    lower, upper = bounds(0.05, 0.05)
    assert lower == pytest.approx(-2.944, abs=1e-3) and upper == pytest.approx(2.944, abs=1e-3)
    assert bounds(0.05, 0.1) == pytest.approx((math.log(0.1 / 0.95), math.log(0.9 / 0.05)))
    cfg = SprtConfig(elo0=0, elo1=50)
    assert status(cfg, "a", "b", [1.0] * 30).decision == "H1"
    assert status(cfg, "a", "b", [0.0] * 30).decision == "H0"
    assert status(cfg, "a", "b", [0.5, 0.75]).decision == "continue"
    est = elo_estimate(Pentanomial(ll=10, ld=20, wl_dd=40, wd=20, ww=10))
    assert est is not None and est.elo == pytest.approx(0.0, abs=1e-9) and est.elo_low < 0 < est.elo_high
    assert elo_estimate(Pentanomial()) is None


def _rec(number: int, seats: list[str], ranks: list[int], outcome: str = "decisive") -> MatchRecord:
    return MatchRecord(
        match_id=f"s-20260101-000000000-abcdef-{number:05d}",
        tournament="s",
        game=GameSpec(name="tic_tac_toe"),
        seats=seats,
        seed=number // 2,
        ranks=ranks,
        outcome=outcome,
    )


def test_status_of_records_pairs_by_schedule_number() -> None:
    records = [
        _rec(0, ["a", "b"], [1, 2]),  # pair 0: a wins both -> WW
        _rec(1, ["b", "a"], [2, 1]),
        _rec(3, ["b", "a"], [1, 1]),  # pair 1: a draw and a loss (in either order) -> LD
        _rec(2, ["a", "b"], [2, 1]),
        _rec(4, ["a", "b"], [1, 2]),  # pair 2: one game without a result -> not scored
        _rec(5, ["b", "a"], [], "error"),
        _rec(6, ["a", "b"], [1, 2]),  # pair 3: incomplete -> not scored
    ]
    st = status_of_records(SprtConfig(), "a", "b", records)
    assert st.pentanomial == [0, 1, 0, 0, 1] and st.pairs == 2


SPRT_FILE = """
name = "s"
format = "sprt"
concurrency = 4
deadline_ms = 5000
seed = 3
{openings}
[sprt]
{sprt}
[[games]]
name = "{game}"
[agents.mcts]
kind = "mcts"
options = {{ simulations = 40, rollouts = 1 }}
[agents.rand]
kind = "random"
"""

BAD = [
    ("alpha = 0", "sprt.alpha"),
    ("alpha = 1.5", "sprt.alpha"),
    ("beta = 0", "sprt.beta"),
    ("beta = -0.1", "sprt.beta"),
    ("elo0 = 5\nelo1 = 5", "sprt.elo0"),
    ("elo0 = 10\nelo1 = 0", "sprt.elo0"),
]


@pytest.mark.parametrize(("sprt", "key"), BAD)
def test_bad_sprt_parameters_name_the_key(sprt: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        parse_config(SPRT_FILE.format(sprt=sprt, game="tic_tac_toe", openings=""))


@pytest.mark.parametrize(("sprt", "key"), [BAD[1], BAD[4]])
def test_bad_sprt_parameters_exit_2(tmp_path: Path, sprt: str, key: str) -> None:
    path = tmp_path / "t.toml"
    path.write_text(SPRT_FILE.format(sprt=sprt, game="tic_tac_toe", openings=""))
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    out = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "run", str(path), "--run-dir", str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 2, out.stdout + out.stderr
    assert key in out.stdout and "Traceback" not in out.stdout + out.stderr
    assert not (tmp_path / "runs").exists()


def test_sprt_needs_two_agents_and_the_table_needs_the_format() -> None:
    three = SPRT_FILE.format(sprt="", game="tic_tac_toe", openings="") + '[agents.x]\nkind = "random"\n'
    with pytest.raises(ConfigError, match="exactly two agents"):
        parse_config(three)
    with pytest.raises(ConfigError, match="format"):
        parse_config(
            SPRT_FILE.format(sprt="", game="tic_tac_toe", openings="").replace('"sprt"', '"round_robin"')
        )


def test_schedule_is_colour_swapped_pairs_with_one_start_each() -> None:
    text = SPRT_FILE.format(sprt="max_pairs = 3", game="chess", openings='openings = ["e4 e5", "d4 d5"]')
    specs = build_schedule(parse_config(text), "t")
    assert len(specs) == 6
    fens = []
    for a, b in zip(specs[0::2], specs[1::2], strict=True):
        assert a.seats == ["mcts", "rand"] and b.seats == ["rand", "mcts"]
        assert a.seed == b.seed and a.game == b.game
        fens.append(a.game.params["fen"])
    assert fens[0] == fens[2] != fens[1]  # the openings in turn
    assert len({s.seed for s in specs}) == 3


@pytest.mark.slow
def test_sprt_run_stops_when_decided_and_records_every_submitted_match(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MCTS against random on tic-tac-toe: H1 (at least 50 Elo better) is accepted long before
    max_pairs, no pair is submitted after the decision but the ones in flight, all recorded."""
    path = tmp_path / "t.toml"
    path.write_text(
        SPRT_FILE.format(sprt="elo0 = 0\nelo1 = 50\nmax_pairs = 60", game="tic_tac_toe", openings="")
    )
    env = {k: v for k, v in os.environ.items() if k != "NATS_URL"}
    out = subprocess.run(
        [sys.executable, "-m", "spielbus.cli", "run", str(path), "--run-dir", str(tmp_path), "--quiet"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    summary = json.loads((folder / "summary.json").read_text())
    sprt = summary["sprt"]
    assert sprt["decision"] == "H1" and sprt["llr"] >= sprt["upper"]
    assert sprt["pairs"] < 60
    lines = (folder / "matches.jsonl").read_text().splitlines()
    # Every submitted match is recorded and counted, the pairs in flight at the decision (two) too.
    assert len(lines) == summary["matches"] == 2 * sprt["pairs"] < summary["scheduled"] == 120
    assert summary["failed"] == {}
    assert "H1 accepted" in out.stdout and "LLR" in out.stdout
    records = [MatchRecord.model_validate_json(line) for line in lines]
    by_id = sorted(records, key=lambda r: r.match_id)
    for a, b in zip(by_id[0::2], by_id[1::2], strict=True):
        assert a.seed == b.seed and a.seats == b.seats[::-1]
    # The agents' options hash reaches the records' provenance (what ratings split by provenance use).
    assert all(
        len((p.model_extra or {}).get("options_hash", "")) == 12 for r in records for p in r.provenance
    )
    # The folder alone gives the same test again (as an interrupted run's summary does).
    again = status_of_records(SprtConfig(elo0=0, elo1=50, max_pairs=60), "mcts", "rand", records)
    assert again.pentanomial == sprt["pentanomial"] and again.llr == pytest.approx(sprt["llr"])
    assert standings_cmd.main([str(folder)]) == 0
    assert "H1 accepted" in capsys.readouterr().out
