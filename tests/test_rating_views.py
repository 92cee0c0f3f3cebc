"""Numbers you can trust (issue 26): one ratings function and one order for every view, Elo K
by name, Bradley-Terry equal to `choix`'s, intervals that are never zero-width by accident,
Plackett-Luce beside Bradley-Terry, and fallbacks, calls and tokens per move in the standings."""

from __future__ import annotations

import json
import random
from pathlib import Path

import choix
import numpy as np
import pytest
from prometheus_client import generate_latest
from rich.console import Console

from bus.protocol import GameSpec, MatchRecord, MoveRecord, MoveStats, Usage
from observability.metrics import RefereeMetrics
from observability.web.feed import MatchFeed
from referee.bradley_terry import ELO_SCALE, fit, with_prior
from referee.config import RatingsConfig, TournamentConfig
from referee.outcome import ranks_from_returns
from referee.ratings import PairTally, bradley_terry, ratings, run_pairs, standings
from referee.run_folder import summarize
from spielbus.report import print_report
from spielbus.standings import main as standings_main
from tests.fixed_records import fixed_records
from tests.helpers import ended_event


def _rec(i: int, seats: list[str], returns: list[float], tournament: str = "t") -> MatchRecord:
    return MatchRecord(
        match_id=f"{tournament}-{i:05d}",
        tournament=tournament,
        game=GameSpec(name="tic_tac_toe" if len(seats) == 2 else "kuhn_poker"),
        seats=seats,
        seed=i,
        returns=returns,
        ranks=ranks_from_returns(returns),
        outcome="decisive",
    )


def test_every_view_shows_the_same_ratings_when_records_arrive_out_of_order(tmp_path: Path) -> None:
    """Before, `spielbus run` rated records in schedule order, `spielbus standings` in the order
    of matches.jsonl (completion order) and the live page in arrival order: three Elos."""
    scheduled = [r for r in fixed_records(200) if r.game.name not in ("leduc_poker",)]
    arrived = scheduled[:]
    random.Random(5).shuffle(arrived)  # completion order: concurrent matches finish out of order
    config = TournamentConfig.model_validate(
        {"games": [{"name": "tic_tac_toe"}], "agents": {"x": {"kind": "random"}}, "seed": 3}
    )
    # The run report (and ratings.json): records read back in schedule order.
    _, report = summarize(scheduled, config)
    # `spielbus standings RUN_DIR`: matches.jsonl as written, in completion order.
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "matches.jsonl").write_text("".join(r.model_dump_json() + "\n" for r in arrived))
    console = Console(record=True, width=200)
    from spielbus import standings as standings_mod

    printed: dict[str, list] = {}
    real = standings_mod.print_report

    def keep(_c: Console, _r: list, table: list, rates: list, _p: str, **_kw: object) -> None:
        printed["rates"] = rates
        real(console, _r, table, rates, _p, **_kw)  # type: ignore[arg-type]

    standings_mod.print_report = keep  # type: ignore[assignment]
    try:
        assert standings_main([str(run_dir)]) == 0
    finally:
        standings_mod.print_report = real
    # The live page and the metrics: records folded as they arrive.
    metrics = RefereeMetrics()
    feed = MatchFeed(on_ratings=lambda _t, rates: metrics.set_ratings(rates), ratings_every=0)
    for rec in arrived:
        feed.apply(ended_event(rec))
    live = feed.compute_ratings("fixed", force=True)
    text = generate_latest(metrics.registry).decode()

    def as_dict(rates: list) -> dict[str, tuple[float, float, float, float]]:
        return {r.agent: (r.elo, r.bt, r.bt_low, r.bt_high) for r in rates}

    assert as_dict(printed["rates"]) == as_dict(report)
    assert as_dict(live) == as_dict(report)
    for r in report:
        assert f'spielbus_rating_elo{{agent="{r.agent}"}} {r.elo}' in text
    # The page's chart draws the same Elo the standings show.
    table = feed.table("fixed")
    assert table is not None and table.history[-1].elo == {r.agent: r.elo for r in report}


def test_elo_k_by_name_and_the_arena_default() -> None:
    assert RatingsConfig(elo_k="llm_coaching").elo_k == 0.2
    assert RatingsConfig().elo_k == RatingsConfig(elo_k="arena").elo_k == 16
    with pytest.raises(ValueError, match="unknown Elo K name"):
        RatingsConfig(elo_k="fast")
    sixteen_nil = [
        _rec(i, ["a", "b"] if i % 2 else ["b", "a"], [1, -1] if i % 2 else [-1, 1]) for i in range(16)
    ]
    arena = {r.agent: r.elo for r in ratings(sixteen_nil, RatingsConfig())}
    paper = {r.agent: r.elo for r in ratings(sixteen_nil, RatingsConfig(elo_k="llm_coaching"))}
    assert arena["a"] - arena["b"] > 150  # a 16-0 match separates them
    assert paper["a"] - paper["b"] < 5  # at K = 0.2 both stay near 1500


def test_bradley_terry_equals_choix_on_the_same_data() -> None:
    """Our MM + Newton estimate (a draw half a win each way, 0.1 pseudo-wins per ordered pair)
    against choix's maximum likelihood on the same comparisons, counted in twentieths (draws and
    the prior are fractions), anchored to mean log-strength 0: equal to 1e-6 Elo."""
    recs = [r for r in fixed_records(300) if r.game.name not in ("leduc_poker", "kuhn_poker")]
    cfg = RatingsConfig()
    agents = sorted({a for r in recs for a in r.seats})
    ours = {r.agent: r.bt for r in ratings(recs, cfg)}
    exact = bradley_terry(run_pairs(recs, cfg), agents)
    idx = {a: i for i, a in enumerate(agents)}
    data: list[tuple[int, int]] = []
    for p in run_pairs(recs, cfg):
        won = round(20 * p.score)
        data += [(idx[p.a], idx[p.b])] * won + [(idx[p.b], idx[p.a])] * (20 - won)
    for i in range(len(agents)):
        for j in range(len(agents)):
            if i != j:
                data += [(i, j)] * 2  # 0.1 pseudo-wins, in twentieths
    params = choix.opt_pairwise(len(agents), data, alpha=0.0, tol=1e-12)
    params = params - params.mean()
    wins = np.zeros((len(agents), len(agents)))
    for p in run_pairs(recs, cfg):
        wins[idx[p.a], idx[p.b]] += p.score
        wins[idx[p.b], idx[p.a]] += 1 - p.score
    _, theta = fit(with_prior(wins, 0.1), np.zeros(len(agents)))
    for a, i in idx.items():
        assert 1500 + ELO_SCALE * theta[i] == pytest.approx(1500 + ELO_SCALE * params[i], abs=1e-6)
        assert ours[a] == pytest.approx(1500 + ELO_SCALE * params[i], abs=0.05)  # rounded to 0.1
        assert exact[a] == pytest.approx(1500 + ELO_SCALE * params[i], abs=1e-3)  # MM alone


def test_a_perfect_score_has_an_honest_interval() -> None:
    """A 4-0 printed [1823, 1823] before: every bootstrap resample of 4-0 is 4-0."""
    four_nil = [_rec(i, ["a", "b"], [1, -1]) for i in range(4)]
    rates = {r.agent: r for r in ratings(four_nil, RatingsConfig())}
    a, b = rates["a"], rates["b"]
    assert a.bt_low < a.bt < a.bt_high and b.bt_low < b.bt < b.bt_high
    assert a.bt_high - a.bt_low > 400  # four games say little
    assert a.bt_low > 1500  # ... but that a is the stronger, at 95%
    # More games: a narrower interval around a larger gap.
    many = {r.agent: r for r in ratings([_rec(i, ["a", "b"], [1, -1]) for i in range(40)], RatingsConfig())}
    assert many["a"].bt_low > a.bt_low


def test_plackett_luce_rates_n_player_matches_whole() -> None:
    """Three-player matches where `x` always wins and `z` always comes last: Plackett-Luce
    (openskill) orders them from the whole ranking, with its uncertainty, beside Bradley-Terry."""
    recs = []
    for i in range(12):
        seats = ["x", "y", "z"]
        random.Random(i).shuffle(seats)
        recs.append(_rec(i, seats, [{"x": 2.0, "y": 1.0, "z": 0.0}[s] for s in seats]))
    rates = {r.agent: r for r in ratings(recs, RatingsConfig())}
    mu = {a: r.pl_mu for a, r in rates.items()}
    assert mu["x"] is not None and mu["y"] is not None and mu["z"] is not None
    assert mu["x"] > mu["y"] > mu["z"]
    assert all(r.pl_sigma is not None and 0 < r.pl_sigma < 25 / 3 for r in rates.values())
    console = Console(record=True, width=200)
    print_report(console, recs, standings(recs), list(rates.values()), "runs/x")
    assert "Plackett-Luce (openskill)" in console.export_text()


def _llm_record(fallbacks: int, normal: int) -> MatchRecord:
    moves = [
        MoveRecord(
            turn=t, player=0, action=0, text="x", agent="llm",
            usage=Usage(llm_calls=2, prompt_tokens=100, completion_tokens=10),
            stats=MoveStats.model_validate({"fallback": 1}) if t < fallbacks else None,
        )
        for t in range(fallbacks + normal)
    ]  # fmt: skip
    return MatchRecord(
        match_id="t-00000", tournament="t", game=GameSpec(name="tic_tac_toe"), seats=["llm", "r"], seed=1,
        moves=moves, returns=[1.0, -1.0], ranks=[1, 2], outcome="decisive",
    )  # fmt: skip


def test_fallbacks_calls_and_tokens_per_move_are_shown_with_a_threshold(tmp_path: Path) -> None:
    rec = _llm_record(fallbacks=1, normal=9)  # 10%: over the default 5%, far from "most"
    (row,) = [s for s in standings([rec]) if s.agent == "llm"]
    assert (row.fallback_rate, row.calls_per_move, row.tokens_per_move) == (0.1, 2.0, 110.0)
    assert json.loads(row.model_dump_json())["tokens_per_move"] == 110.0  # standings.json
    console = Console(record=True, width=220)
    print_report(console, [rec], [row], [], "runs/x")
    text = console.export_text()
    assert "calls/move" in text and "tokens/move" in text and "10.0%" in text
    assert "warning:" in text and "over the 5% threshold" in text
    console = Console(record=True, width=220)
    print_report(console, [rec], [row], [], "runs/x", fallback_threshold=0.2)
    assert "warning:" not in console.export_text()
    metrics = RefereeMetrics()
    metrics.on_event(ended_event(rec))
    text = generate_latest(metrics.registry).decode()
    assert 'spielbus_fallback_moves_total{agent="llm",game="tic_tac_toe"} 1.0' in text
    assert 'spielbus_move_tokens_total{agent="llm",game="tic_tac_toe"} 1100.0' in text
    assert TournamentConfig.model_fields["fallback_threshold"].default == 0.05


def test_pair_tally_replays_in_order_only_when_needed() -> None:
    recs = [_rec(i, ["a", "b"], [1, -1] if i % 3 else [-1, 1]) for i in range(30)]
    forward, backward = PairTally(RatingsConfig()), PairTally(RatingsConfig())
    for r in recs:
        forward.add_record(r)
    for r in reversed(recs):
        backward.add_record(r)
    assert forward.in_order and not backward.in_order
    assert forward.ratings() == backward.ratings() == ratings(recs, RatingsConfig())
