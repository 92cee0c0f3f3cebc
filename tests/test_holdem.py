"""Simplified Texas Hold'em: blinds, action mapping, all-in, fold-out, showdown (checked against an
independent evaluator, phevaluator), agreement with the universal_poker engine, views, bad parameters."""

from __future__ import annotations

import random
import re

import pyspiel
import pytest

from games.holdem.game import ALLIN, CALL, FOLD, RAISE
from games.loader import GameSpecError, load_game, parse_spec
from referee.turns import TurnFrame, build_turn

phevaluator = pytest.importorskip("phevaluator")


def deal(state: pyspiel.State, cards: list[int]) -> None:
    for c in cards:
        assert state.is_chance_node()
        state.apply_action(c)


def card(name: str) -> int:
    return "23456789TJQKA".index(name[0]) * 4 + "cdhs".index(name[1])


def test_heads_up_blinds_and_first_actions() -> None:
    s = load_game("simplified_holdem").new_initial_state()
    deal(s, [0, 1, 2, 3])
    assert s.spent == [2, 1] and s.pot() == 3
    assert s.current_player() == 1  # the small blind acts first preflop
    assert s.legal_actions() == [FOLD, CALL, RAISE, ALLIN]
    assert [s.action_to_string(a) for a in s.legal_actions()] == ["Fold", "Call", "Raise", "Allin"]
    assert s.raise_to() == 2 + 4  # highest bet + floor(1.5 * pot 3)
    s.apply_action(CALL)
    # The big blind may check for free: no Fold.
    assert s.current_player() == 0 and s.legal_actions() == [CALL, RAISE, ALLIN]
    assert s.raise_to() == 2 + 6
    s.apply_action(CALL)
    assert s.is_chance_node()
    deal(s, [10, 11, 12])
    assert s.current_player() == 0  # heads-up, the big blind acts first after the flop
    assert s.round() == 1 and s.sequence_text() == "c,c/"


def test_three_players_blinds_and_order() -> None:
    s = load_game("simplified_holdem(players=3)").new_initial_state()
    deal(s, list(range(6)))
    assert s.spent == [2, 0, 1]
    order = []
    for _ in range(3):
        order.append(s.current_player())
        s.apply_action(CALL)
    assert order == [1, 2, 0]
    deal(s, [10, 11, 12])
    assert s.current_player() == 2  # the small blind opens the later rounds


def test_fold_out_pays_the_blinds() -> None:
    s = load_game("simplified_holdem").new_initial_state()
    deal(s, [0, 1, 2, 3])
    s.apply_action(FOLD)
    assert s.is_terminal() and s.returns() == [1.0, -1.0]
    s3 = load_game("simplified_holdem(players=3)").new_initial_state()
    deal(s3, list(range(6)))
    s3.apply_action(FOLD)  # seat 1 (no blind)
    s3.apply_action(FOLD)  # seat 2 (small blind)
    assert s3.is_terminal() and s3.returns() == [1.0, 0.0, -1.0]


def test_raise_is_offered_only_below_the_stack() -> None:
    s = load_game("simplified_holdem(stack=5)").new_initial_state()
    deal(s, [0, 1, 2, 3])
    assert s.legal_actions() == [FOLD, CALL, ALLIN]  # raise to 6 would not fit in 5
    s.apply_action(ALLIN)
    assert s.spent == [2, 5] and s.legal_actions() == [FOLD, CALL]


def _showdown_winners(hole: list[list[str]], board: list[str]) -> set[int]:
    ranks = [phevaluator.evaluate_cards(*h, *board) for h in hole]  # lower is stronger
    best = min(ranks)
    return {i for i, r in enumerate(ranks) if r == best}


@pytest.mark.parametrize("players", [2, 3])
def test_all_in_showdown_agrees_with_phevaluator(players: int) -> None:
    """All-in and call down to the river: the engine's payoffs match an independent evaluator."""
    game = load_game(f"simplified_holdem(players={players})")
    rng = random.Random(players)
    stack = 50
    for _ in range(300):
        cards = rng.sample(range(52), 2 * players + 5)
        s = game.new_initial_state()
        deal(s, cards[: 2 * players])
        s.apply_action(ALLIN)
        while not s.is_chance_node():
            s.apply_action(CALL)
        deal(s, cards[2 * players :])
        assert s.is_terminal()
        names = [s._g.card_name(c) for c in cards]
        hole = [names[2 * i : 2 * i + 2] for i in range(players)]
        winners = _showdown_winners(hole, names[2 * players :])
        pot = stack * players
        expected = [pot / len(winners) - stack if i in winners else -stack for i in range(players)]
        assert s.returns() == pytest.approx(expected), (hole, names[2 * players :])


def test_check_down_showdown_agrees_with_phevaluator() -> None:
    game = load_game("simplified_holdem")
    rng = random.Random(9)
    for _ in range(200):
        cards = rng.sample(range(52), 9)
        s = game.new_initial_state()
        deal(s, cards[:4])
        board = iter(cards[4:])
        while not s.is_terminal():
            if s.is_chance_node():
                s.apply_action(next(board))
            else:
                s.apply_action(CALL)
        names = [s._g.card_name(c) for c in cards]
        winners = _showdown_winners([names[0:2], names[2:4]], names[4:])
        expected = [0.0, 0.0] if len(winners) == 2 else [2.0 if i in winners else -2.0 for i in range(2)]
        assert s.returns() == expected


def _engine_spent(state: pyspiel.State) -> list[int]:
    m = re.search(r"Spent: \[(.*?)\]", str(state._h.engine))
    assert m
    return [int(x) for x in re.findall(r"P\d+: (\d+)", m.group(1))]


@pytest.mark.parametrize(
    "spec", ["simplified_holdem", "simplified_holdem(players=4,stack=30)", "simplified_holdem(stack=7)"]
)
def test_random_play_stays_in_step_with_the_engine(spec: str) -> None:
    game = load_game(spec)
    rng = random.Random(1)
    for _ in range(200):
        s = game.new_initial_state()
        while not s.is_terminal():
            if s.is_chance_node():
                s.apply_action(rng.choice([a for a, _ in s.chance_outcomes()]))
            else:
                s.apply_action(rng.choice(s.legal_actions()))
            assert s.spent == _engine_spent(s)
            acpc = str(s._h.engine).split("ACPC State: ")[1].split(":")[2]
            assert s.sequence_text().replace(",", "").rstrip("/") == acpc.rstrip("/")
        assert sum(s.returns()) == pytest.approx(0.0)
        assert all(-game.stack <= r <= game.stack * (game.n - 1) for r in s.returns())


def test_clone_is_independent() -> None:
    s = load_game("simplified_holdem").new_initial_state()
    deal(s, [0, 1, 2, 3])
    c = s.clone()
    c.apply_action(RAISE)
    assert s.spent == [2, 1] and c.spent == [2, 6]
    assert s.history() == [0, 1, 2, 3] and c.history() == [0, 1, 2, 3, RAISE]


def test_tiny_deck_version() -> None:
    game = load_game("simplified_holdem(ranks=3,suits=2,hole_cards=1,flop=1,turn=0,stack=10)")
    s = game.new_initial_state()
    assert len(s.chance_outcomes()) == 6
    deal(s, [0, 5])
    assert s.information_state_string(0) != s.information_state_string(1)
    s.apply_action(CALL)
    s.apply_action(CALL)
    deal(s, [2])
    assert s.round() == 1
    s.apply_action(CALL)
    s.apply_action(CALL)
    assert s.is_terminal() and s.returns() == [-2.0, 2.0]  # 2c vs 4d on a 3c board: the 4 is high


@pytest.mark.parametrize(
    "bad",
    [
        "simplified_holdem(players=1)",
        "simplified_holdem(stack=2)",
        "simplified_holdem(ranks=14)",
        "simplified_holdem(flop=x)",
        "simplified_holdem(turn=-1)",
        "simplified_holdem(ranks=2,suits=2,hole_cards=2,flop=3,turn=0)",
    ],
)
def test_bad_parameters_are_refused(bad: str) -> None:
    with pytest.raises(GameSpecError):
        load_game(bad)


def test_views_show_only_the_seats_own_cards() -> None:
    s = load_game("simplified_holdem").new_initial_state()
    deal(s, [card("As"), card("Kd"), card("2c"), card("7h")])
    mine = s.information_state_string(1)
    assert "[2c 7h]" in mine and "As" not in mine and "Kd" not in mine
    assert "Your legal actions: [Fold, Call, Raise, Allin]" in mine
    assert "Waiting for player 1" in s.information_state_string(0)
    turn = build_turn(TurnFrame("m", parse_spec("simplified_holdem"), ["a", "b"], 1000), s, 1, 1, None)
    view = turn.observation_json
    assert view is not None
    assert view["private_cards"] == ["2c", "7h"] and view["pot"] == 3 and view["raise_to"] == 6
    assert view["legal_actions"] == ["Fold", "Call", "Raise", "Allin"]
    assert "As" not in str(view)
    prompt = s.decision_prompt(1)
    assert "Your player ID is **1**" in prompt and "[2c 7h]" in prompt and "[Fold], [Call]" in prompt
    rules = load_game("simplified_holdem").rules_text()
    assert "1.5 times the current pot" in rules
