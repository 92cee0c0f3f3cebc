"""`[ratings] anchors`: two separate seeded runs that share anchors rate their common agent alike.

Each run is a round robin of simulated win/loss records drawn from known Elo ratings: the two
anchors (calibrated references, held at their true ratings), the common agent `x`, and one agent of
the run's own (a middling one in the first run, a far stronger one in the second). Without anchors
Bradley-Terry is pinned by its mean, which the other agents move, so `x` lands elsewhere in each run;
with them both runs put `x` where the anchors' scale says."""

from __future__ import annotations

import random

import pytest

from bus.protocol import GameSpec, MatchRecord
from referee.config import ConfigError, RatingsConfig, load_config
from referee.ratings import Rating, ratings

TRUE = {"ref_lo": 1000.0, "ref_hi": 1600.0, "x": 1300.0, "y": 1450.0, "z": 1900.0}
ANCHORS = {"ref_lo": 1000.0, "ref_hi": 1600.0}


def run(agents: list[str], seed: int, games: int = 150) -> list[MatchRecord]:
    rng = random.Random(seed)
    out = []
    for i, a in enumerate(agents):
        for b in agents[i + 1 :]:
            p = 1 / (1 + 10 ** ((TRUE[b] - TRUE[a]) / 400))
            for g in range(games):
                seats = [a, b] if g % 2 == 0 else [b, a]
                a_wins = rng.random() < p
                rets = [1.0, -1.0] if (seats[0] == a) == a_wins else [-1.0, 1.0]
                out.append(
                    MatchRecord(
                        match_id=f"{seed}-{a}-{b}-{g}",
                        tournament="t",
                        game=GameSpec(name="tic_tac_toe"),
                        seats=seats,
                        seed=g,
                        returns=rets,
                        ranks=[1, 2] if rets[0] > 0 else [2, 1],
                        outcome="decisive",
                    )
                )
    return out


def rating_of(rates: list[Rating], agent: str) -> Rating:
    return next(r for r in rates if r.agent == agent)


def overlap(a: Rating, b: Rating) -> bool:
    return a.bt_low <= b.bt_high and b.bt_low <= a.bt_high


def test_runs_sharing_anchors_agree_on_their_common_agent() -> None:
    first = run(["ref_lo", "ref_hi", "x", "y"], seed=1)
    second = run(["ref_lo", "ref_hi", "x", "z"], seed=2)

    plain = RatingsConfig()
    x1, x2 = rating_of(ratings(first, plain), "x"), rating_of(ratings(second, plain), "x")
    assert not overlap(x1, x2), (x1, x2)  # the mean-0 scale moves with the company

    anchored = RatingsConfig(anchors=ANCHORS)
    r1, r2 = ratings(first, anchored), ratings(second, anchored)
    x1, x2 = rating_of(r1, "x"), rating_of(r2, "x")
    assert overlap(x1, x2), (x1, x2)
    for x in (x1, x2):
        assert x.bt_low <= TRUE["x"] <= x.bt_high and x.bt_low < x.bt < x.bt_high
    for rates in (r1, r2):
        for name, value in ANCHORS.items():
            r = rating_of(rates, name)
            assert r.bt == r.bt_low == r.bt_high == value
        # Elo is shifted onto the same scale: the anchors sit at their ratings on average.
        mean = sum(rating_of(rates, n).elo for n in ANCHORS) / len(ANCHORS)
        assert mean == pytest.approx(sum(ANCHORS.values()) / len(ANCHORS), abs=0.02)
    z = rating_of(r2, "z")
    assert z.bt_low <= TRUE["z"] <= z.bt_high


def test_an_anchor_must_name_an_agent(tmp_path) -> None:
    f = tmp_path / "t.toml"
    f.write_text(
        'name = "a"\n[[games]]\nname = "tic_tac_toe"\n'
        '[agents.r1]\nkind = "random"\n[agents.r2]\nkind = "random"\n'
        "[ratings]\nanchors = { r1 = 1000.0, stockfish = 1500.0 }\n"
    )
    with pytest.raises(ConfigError, match="stockfish"):
        load_config(f)
    f.write_text(f.read_text().replace("stockfish = 1500.0", "r2 = nan"))
    with pytest.raises(ConfigError):
        load_config(f)
