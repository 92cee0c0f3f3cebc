"""The tournament file, the schedule it yields, and the ratings computed from records."""

from __future__ import annotations

import math
from collections import Counter

import pytest

from bus.protocol import FaultRecord, GameSpec, MatchRecord, MatchSpec
from bus.subjects import MAX_TOKEN
from referee.config import ConfigError, RatingsConfig, parse_config
from referee.ladder.config import parse_ladder
from referee.outcome import ranks_from_returns
from referee.ratings import bradley_terry, brownian_win_probability, elo, ratings, run_pairs, standings
from referee.run_folder import tournament_id
from referee.schedule import build_schedule
from referee.terms import AGENT_NAME_MAX, NAME_MAX

BASE = """
name = "t"
games_per_pairing = 2
[[games]]
name = "tic_tac_toe"
[agents.a]
kind = "random"
[agents.b]
kind = "random"
[agents.c]
kind = "mcts"
options = { simulations = 10 }
"""


def test_round_robin_both_seat_orders() -> None:
    specs = build_schedule(parse_config(BASE), "t-1")
    pairs = Counter(tuple(s.seats) for s in specs)
    assert len(specs) == 3 * 2 * 2
    for x, y in [("a", "b"), ("a", "c"), ("b", "c")]:
        assert pairs[(x, y)] == 2 and pairs[(y, x)] == 2
    assert len({s.match_id for s in specs}) == len(specs)
    assert len({s.seed for s in specs}) == len(specs)


def test_gauntlet_plays_only_against_champions() -> None:
    cfg = parse_config(BASE.replace('name = "t"', 'name = "t"\nformat = "gauntlet"\nchampions = ["c"]'))
    specs = build_schedule(cfg, "t-1")
    assert all("c" in s.seats for s in specs)
    assert len(specs) == 2 * 2 * 2


def test_n_player_games_shuffle_seats_deterministically() -> None:
    text = BASE.replace('name = "tic_tac_toe"', 'name = "kuhn_poker"\nparams = { players = 3 }').replace(
        "games_per_pairing = 2", "games_per_pairing = 12"
    )
    specs = build_schedule(parse_config(text), "t-1")
    assert len(specs) == 12
    assert all(sorted(s.seats) == ["a", "b", "c"] for s in specs)
    assert len({tuple(s.seats) for s in specs}) > 1, "seat order never changed"
    again = build_schedule(parse_config(text), "t-1")
    assert [s.seats for s in specs] == [s.seats for s in again]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (BASE.replace('kind = "mcts"', 'kind = "mcts"\nbogus = 1'), ":12: agents.c.bogus: unknown key"),
        (BASE.replace("games_per_pairing = 2", "games_per_pairing = 0"), ":3: games_per_pairing"),
        (BASE.replace("games_per_pairing = 2", "games_per_pairing = 'x'"), ":3: games_per_pairing"),
        # Strict like the wire: a number written as a string, a float for an int, a string for a
        # bool and a float that is not finite are errors, never coerced.
        (BASE.replace("games_per_pairing = 2", 'games_per_pairing = "3"'), ":3: games_per_pairing"),
        (BASE.replace("games_per_pairing = 2", "games_per_pairing = 3.0"), ":3: games_per_pairing"),
        (BASE.replace('name = "t"', 'name = "t"\nboth_seat_orders = "no"'), ":3: both_seat_orders"),
        (BASE + "[ratings]\nelo_k = inf\n", "ratings.elo_k"),
        (BASE + '[sprt]\nelo1 = "10"\n', "sprt.elo1"),
        (BASE.replace('name = "t"', 'name = "has space"'), "name"),
        ("name = ", "not valid TOML"),
        (BASE.replace('[[games]]\nname = "tic_tac_toe"\n', ""), "games: Field required"),
    ],
)
def test_bad_config_names_key_and_line(text: str, needle: str) -> None:
    with pytest.raises(ConfigError) as exc:
        parse_config(text, "f.toml")
    assert needle in str(exc.value)


def test_unknown_game_is_a_config_error() -> None:
    cfg = parse_config(BASE.replace("tic_tac_toe", "no_such_game"))
    with pytest.raises(ConfigError, match=r"games\[0\].*unknown game 'no_such_game'"):
        build_schedule(cfg, "t")


def _rec(seats: list[str], returns: list[float], game: str = "tic_tac_toe", **kw: object) -> MatchRecord:
    return MatchRecord(
        match_id="m",
        tournament="t",
        game=GameSpec(name=game),
        seats=seats,
        seed=0,
        returns=returns,
        ranks=ranks_from_returns(returns),
        outcome=kw.pop("outcome", "decisive"),
        **kw,
    )


def test_ranks_from_returns() -> None:
    assert ranks_from_returns([1, -1]) == [1, 2]
    assert ranks_from_returns([0, 0]) == [1, 1]
    assert ranks_from_returns([-3, -1, -1, -5]) == [3, 1, 1, 4]


def test_elo_matches_seed_004_formula() -> None:
    cfg = RatingsConfig(elo_k=0.2)
    r = elo([_rec(["a", "b"], [1, -1])], cfg, ["a", "b"])
    # Equal ratings: E = 0.5, so a gains K * 0.5.
    assert r["a"] == pytest.approx(1500 + 0.1) and r["b"] == pytest.approx(1500 - 0.1)


def test_brownian_win_probability() -> None:
    assert brownian_win_probability(0.0, 5.0, 100) == pytest.approx(0.5)
    # eq. 19: variance floored at 100
    assert brownian_win_probability(0.5, 4.0, 100) == pytest.approx(
        1 - 1 / (1 + math.exp(2 * 100 * 0.5 / 100))
    )
    assert brownian_win_probability(-0.5, 400.0, 100) < 0.5


def test_invalid_action_adjustment_for_chess() -> None:
    rec = _rec(
        ["a", "b"],
        [-1, 1],
        game="chess",
        outcome="forfeit",
        forfeited=[0],
        faults=[FaultRecord(turn=1, seat=0, agent="a", reason="illegal")],
    )
    (pair,) = run_pairs([rec], RatingsConfig())
    assert pair.score == pytest.approx(0.5 * (1 - 0.3))
    rec.faults[0].reason = "timeout"
    (pair,) = run_pairs([rec], RatingsConfig())
    assert pair.score == 0.0


def test_bradley_terry_orders_and_its_interval_brackets() -> None:
    recs = [_rec(["a", "b"], [1, -1]) for _ in range(8)] + [_rec(["b", "a"], [1, -1]) for _ in range(2)]
    recs += [_rec(["b", "c"], [1, -1]) for _ in range(6)] + [_rec(["a", "c"], [0, 0]) for _ in range(2)]
    rates = {r.agent: r for r in ratings(recs, RatingsConfig())}
    assert rates["a"].bt > rates["b"].bt > rates["c"].bt
    for r in rates.values():
        assert r.bt_low <= r.bt <= r.bt_high
    assert rates["a"].bt_high > rates["a"].bt_low
    bt = bradley_terry(run_pairs(recs, RatingsConfig()), ["a", "b", "c"])
    assert bt["a"] == pytest.approx(rates["a"].bt, abs=0.1)


def test_standings_and_fault_rate() -> None:
    recs = [
        _rec(["a", "b"], [1, -1]),
        _rec(["a", "b"], [0, 0], outcome="draw"),
        _rec(
            ["b", "a"],
            [1, -1],
            outcome="forfeit",
            forfeited=[1],
            faults=[FaultRecord(turn=1, seat=1, agent="a", reason="timeout")],
        ),
    ]
    table = {s.agent: s for s in standings(recs)}
    assert (table["a"].wins, table["a"].losses, table["a"].draws) == (1, 1, 1)
    assert table["a"].faults == {"timeout": 1}
    assert table["a"].faults_per_100_moves == 100.0  # one move asked for, one fault


def test_named_llm_endpoint_becomes_the_agents_llm_option() -> None:
    text = (
        BASE
        + '\n[agents.p]\nkind = "llm_policy"\nllm = "local"\n'
        + '[llm.local]\nbase_url = "http://x:1/v1"\nmodel = "m"\n'
    )
    cfg = parse_config(text)
    assert cfg.agent_options("p") == {"llm": {"base_url": "http://x:1/v1", "model": "m"}}
    with pytest.raises(ConfigError, match=r"no \[llm.nope\] section"):
        parse_config(text.replace('llm = "local"', 'llm = "nope"'))


def test_which_agents_need_the_embedded_llm(monkeypatch: pytest.MonkeyPatch) -> None:
    from spielbus.llm_launch import needs_embedded_llm

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert needs_embedded_llm("llm_policy", {})
    assert not needs_embedded_llm("random", {})
    assert not needs_embedded_llm("minimax_tot", {"llm": {"base_url": "http://h/v1"}})
    assert not needs_embedded_llm("tot", {"llm": {"backend": "ollama"}})
    monkeypatch.setenv("OPENAI_BASE_URL", "http://elsewhere/v1")
    assert not needs_embedded_llm("llm_policy", {})


LADDER_TAIL = '\n[[games]]\nname = "tic_tac_toe"\n[agents.a]\n[agents.b]\n'
BAD_NAMES = ["n" * (NAME_MAX + 1), "n" * 120, "has.dot", "has space", "", "a*"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_a_ladder_file_and_a_tournament_file_refuse_the_same_names(name: str) -> None:
    """One definition of a match's terms (referee/terms.py): a 120-character ladder name once
    loaded, and then every match id built from it (137 characters) was refused at submission."""
    with pytest.raises(ConfigError, match="name"):
        parse_config(f"name = {name!r}\n" + BASE.split("\n", 2)[2])
    with pytest.raises(ConfigError, match="name"):
        parse_ladder(f"name = {name!r}" + LADDER_TAIL)
    agent = f"[agents.{name!r}]\n" if name else '[agents.""]\n'
    with pytest.raises(ConfigError, match="agent name"):
        parse_config(
            '[[games]]\nname = "tic_tac_toe"\n[agents.a]\nkind = "random"\n' + agent + 'kind = "random"\n'
        )
    with pytest.raises(ConfigError, match="agent name"):
        parse_ladder('[[games]]\nname = "tic_tac_toe"\n[agents.a]\n' + agent)


def test_the_longest_names_either_file_takes_build_valid_match_ids() -> None:
    """Both files build their specs with `MatchTerms.spec`; ids from the longest names are tokens."""
    name, agent = "n" * NAME_MAX, "g" * AGENT_NAME_MAX
    cfg = parse_config(
        f'name = "{name}"\n[[games]]\nname = "tic_tac_toe"\n[agents.a]\nkind = "random"\n'
        f'[agents.{agent}]\nkind = "random"\n'
    )
    tid = tournament_id(cfg)
    specs = build_schedule(cfg, tid)
    assert specs and all(s.deadline_ms == 10_000 and len(s.match_id) <= MAX_TOKEN for s in specs)
    ladder = parse_ladder(f'name = "{name}"\n[[games]]\nname = "tic_tac_toe"\n[agents.a]\n[agents.{agent}]\n')
    spec = ladder.spec(ladder.new_match_id(), ladder.name, ladder.games[0], ["a", agent], 1)
    assert spec.deadline_ms == 5000 and spec.secret and spec.secret != specs[0].secret
    assert MatchSpec.model_validate_json(spec.model_dump_json()) == spec


def test_a_ladder_file_refuses_unknown_game_keys_like_a_tournament_file() -> None:
    with pytest.raises(ConfigError, match="unknown key 'paramz'"):
        parse_ladder('[[games]]\nname = "tic_tac_toe"\nparamz = {}\n[agents.a]\n[agents.b]\n')
    with pytest.raises(ConfigError, match="unknown key 'paramz'"):
        parse_config('[[games]]\nname = "tic_tac_toe"\nparamz = {}\n[agents.a]\nkind = "random"\n')
