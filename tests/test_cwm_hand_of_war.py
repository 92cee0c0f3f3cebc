"""Hand of war (appendix I.10 of "Code World Models for General Game Playing"): every rule the
appendix names, and what each seat may see."""

from __future__ import annotations

import random

import pyspiel
import pytest

from games.cwm.hand_of_war import DECK, card_name
from games.loader import load_game
from games.rules import rules_text
from games.view import SeatHistory, json_view, observation_text

CHANCE = int(pyspiel.PlayerId.CHANCE)
NAMES = {card_name(c): c for c in range(DECK)}


def ids(names: str) -> list[int]:
    return [NAMES[n] for n in names.split()]


def run(script: str, state: pyspiel.State | None = None) -> pyspiel.State:
    """Apply card names in order; whoever is to move (chance or a player) takes the next one."""
    state = state or load_game("hand_of_war").new_initial_state()
    for card in ids(script):
        assert not state.is_terminal(), state
        if state.is_chance_node():
            assert card in [a for a, _ in state.chance_outcomes()]
        else:
            assert card in state.legal_actions(), (card_name(card), state)
        state.apply_action(card)
    return state


DEAL = "As Kd Qs  Ah Kh Js"  # player 0 then player 1 draw three each


def test_deck_deal_and_hands() -> None:
    game = load_game("hand_of_war")
    assert game.num_distinct_actions() == 16 and game.num_players() == 2
    state = game.new_initial_state()
    assert state.is_chance_node() and len(state.chance_outcomes()) == 16
    assert sum(p for _, p in state.chance_outcomes()) == pytest.approx(1.0)
    state = run(DEAL, state)
    assert state.current_player() == 0
    assert state.legal_actions() == sorted(ids("As Kd Qs"))
    assert state.pile == [5, 5]
    assert [card_name(c) for c in sorted(state.hands[1])] == ["Js", "Kh", "Ah"]


def test_higher_card_wins_both_and_hands_refill() -> None:
    state = run(DEAL + "  Kd Js")  # K beats J
    assert state.wins == [ids("Kd Js"), []]
    assert state.revealed == ids("Kd Js")
    assert state.is_chance_node()  # both replenish to three: player 0 first
    state = run("Qh Qd", state)
    assert sorted(state.hands[0]) == sorted(ids("As Qs Qh"))
    assert sorted(state.hands[1]) == sorted(ids("Ah Kh Qd"))
    assert state.pile == [4, 4] and state.current_player() == 0
    state = run("Qs Ah", state)  # ace is high
    assert len(state.wins[1]) == 2 and len(state.wins[0]) == 2


def test_tie_is_a_showdown_burn_one_then_face_up() -> None:
    state = run(DEAL + "  As Ah")  # same rank, suits do not matter
    assert not state.wins[0] and not state.wins[1]
    assert state.showdown == 1 and state.is_chance_node()
    state = run("Jd Jc", state)  # each burns the top card of its draw pile, face down
    assert state.pile == [4, 4] and state.burned == 2
    assert len(state.hands[0]) == 2 and len(state.hands[1]) == 2  # no refill during a showdown
    state = run("Qs", state)  # player 0 places Qs face up: player 1 sees it before choosing
    assert "player 0 placed Qs face up" in observation_text(state, 1)
    assert "Qs" in state.information_state_string(1)
    state = run("Kh", state)
    assert sorted(state.wins[1]) == sorted(ids("As Ah Jd Jc Qs Kh"))  # all cards of the showdown
    assert state.stake == [] and state.showdown == 0
    for seat in (0, 1):  # burned cards are never shown
        assert "Jd" not in state.information_state_string(seat)
        assert "Jc" not in state.information_state_string(seat)
    state = run("Qh Qd Jh Kc", state)  # both replenish to three
    assert len(state.hands[0]) == 3 and len(state.hands[1]) == 3 and state.pile == [2, 2]


def test_another_tie_repeats_the_showdown() -> None:
    state = run("As Kd Qs  Ah Ks Qh  As Ah  Jd Jc  Kd Ks")
    assert state.showdown == 2 and state.is_chance_node()
    state = run("Jh Js  Qs Qh", state)  # third tie
    assert state.showdown == 3 and len(state.stake) == 10
    # Both hands are now empty: the next showdown cannot be played (burn is possible, choosing is not).
    state = run("Qd Qc", state)
    assert state.is_terminal() and state.returns() == [0.0, 0.0]
    assert "hand is empty" in state.reason and state.wins == [[], []]  # stake counts for nobody


def test_depleted_draw_pile_ends_on_win_piles() -> None:
    # Recorded random games: draw piles empty when drawing (player 0 has more won cards),
    # equal win piles (a draw), and empty when burning.
    won = [15, 10, 11, 13, 5, 1, 11, 13, 2, 12, 15, 12, 8, 14, 2, 1, 0, 6, 10, 5, 7, 3]
    state = load_game("hand_of_war").new_initial_state()
    for a in won[:-1]:
        state.apply_action(a)
    # After a won showdown player 0 holds one card and refills: its pile has one card, it needs two.
    assert state.is_chance_node() and state.pile[0] == 1 and len(state.hands[0]) == 1
    state.apply_action(won[-1])  # the last card of the pile; the next draw cannot be done
    assert state.is_terminal() and state.returns() == [1.0, -1.0]
    assert "draw pile is empty" in state.reason and "10 to 2" in state.reason
    tie = [5, 6, 2, 9, 4, 14, 6, 4, 0, 15, 2, 14, 13, 10, 11, 7, 10, 9, 1, 3, 13, 11, 8]
    state = load_game("hand_of_war").new_initial_state()
    for a in tie:
        state.apply_action(a)
    assert state.is_terminal() and state.returns() == [0.0, 0.0] and "6 to 6" in state.reason
    burn = [14, 15, 9, 10, 3, 13, 14, 13, 5, 11, 9, 10, 0, 1, 15, 3, 7, 4, 12, 2, 6, 8, 4, 6]
    state = load_game("hand_of_war").new_initial_state()
    for a in burn:
        state.apply_action(a)
    assert state.is_terminal() and "must burn" in state.reason and state.returns() == [1.0, -1.0]


def test_owning_all_sixteen_cards_wins_at_once() -> None:
    history = [5, 10, 3, 11, 0, 2, 10, 11, 15, 14, 5, 0, 8, 12, 13, 6, 3, 2, 9, 7, 12, 13, 1, 4, 8, 6]
    state = load_game("hand_of_war").new_initial_state()
    for a in history:
        state.apply_action(a)
    assert state.is_terminal() and state.returns() == [1.0, -1.0]
    assert len(state.wins[0]) == 16 and "owns all 16" in state.reason


def test_face_down_card_and_draws_stay_hidden() -> None:
    """Two histories that differ only in player 0's hand and face-down card look the same to player 1."""
    a = run("As Kd Qs  Ah Kh Js  As")
    b = run("Ad Jd Qd  Ah Kh Js  Jd")
    for view in (lambda s: s.information_state_string(1), lambda s: s.observation_string(1)):
        assert view(a) == view(b)
    assert json_view(a, 1) == json_view(b, 1)
    hidden = json_view(a, 1)
    assert isinstance(hidden, dict) and hidden["table"] == {"0": "face down"}
    assert a.information_state_string(0) != b.information_state_string(0)
    assert "you placed As face down" in a.information_state_string(0)
    # The referee's history: player 1 sees neither player 0's draws nor its face-down card.
    state = load_game("hand_of_war").new_initial_state()
    hist = SeatHistory(2)
    for card in ids("As Kd Qs  Ah Kh Js  As Kh"):
        hist.record(state, state.current_player(), card)
        state.apply_action(card)
    seen1 = hist.items[1]
    assert [h.action for h in seen1[:3]] == [None, None, None]  # player 0's draws
    assert [h.action for h in seen1[3:6]] == ids("Ah Kh Js")
    assert seen1[6].action is None  # face down
    assert hist.items[0][7].action == NAMES["Kh"]  # revealed at once with the battle


def test_random_games_keep_the_deck_whole_and_end() -> None:
    rng = random.Random(3)
    game = load_game("hand_of_war")
    for _ in range(200):
        state = game.new_initial_state()
        while not state.is_terminal():
            legal = (
                [a for a, _ in state.chance_outcomes()] if state.is_chance_node() else state.legal_actions()
            )
            state.apply_action(rng.choice(legal))
            cards = state.unseen + state.hands[0] + state.hands[1] + state.wins[0] + state.wins[1]
            assert sorted(cards + state.stake) == list(range(DECK))
            assert len(state.unseen) == state.pile[0] + state.pile[1]
        assert len(state.history()) <= game.max_game_length()
        n0, n1 = len(state.wins[0]), len(state.wins[1])
        assert state.returns() == ([1.0, -1.0] if n0 > n1 else [-1.0, 1.0] if n1 > n0 else [0.0, 0.0])


def test_rules_text_and_views() -> None:
    text = rules_text(load_game("hand_of_war"))
    assert text.startswith("Hand of War.") and "Showdown" in text and "PubliclyRevealedCards" in text
    state = run(DEAL + "  Kd Js")
    view = json_view(state, 0)
    assert isinstance(view, dict)
    assert view["win_piles"] == [2, 0] and view["publicly_revealed_cards"] == ["Kd", "Js"]
    assert view["hand"] == ["Qs", "As"] and view["to_move"] is None  # chance refills
    assert "PubliclyRevealedCards: Kd Js." in observation_text(state, 1)
