"""Kuhn poker decisions scored against the equilibrium, checked by hand.

Kuhn poker (OpenSpiel's `kuhn_poker`): each player antes 1 chip and is dealt one of J < Q < K
(cards 0, 1, 2); action 0 is pass (check or fold), 1 is bet (bet or call, 1 chip). The hand values
below need no solver: a king always wins a showdown, a jack always loses one, and a queen facing a
bet is indifferent at every equilibrium (the bettor bluffs with J at a third of the rate it value-
bets with K, so calling wins 2 a quarter of the time and loses 2 the rest: -1, the same as folding).
"""

from __future__ import annotations

import pytest

from analysis.equilibrium import EquilibriumJudge
from analysis.match import Judges, analyse_match
from bus.protocol import GameSpec, MatchRecord, MoveRecord
from games.loader import load_game

PASS, BET = 0, 1
J, Q, K = 0, 1, 2


@pytest.fixture(scope="module")
def judge() -> EquilibriumJudge:
    # Solved closer than the default (0.002 chips per game): an information set's values stray from
    # the equilibrium's by up to the exploitability over its reach, here well under the 0.01 checked.
    return EquilibriumJudge(load_game("kuhn_poker"), iterations=5000, target=1e-5)


def _state(cards: tuple[int, int], actions: list[int]):
    state = load_game("kuhn_poker").new_initial_state()
    for a in [*cards, *actions]:
        state.apply_action(a)
    return state


@pytest.mark.parametrize(
    ("cards", "actions", "played", "value_played", "loss"),
    [
        # Second player, king, facing a bet: calling wins the ante and the bet (+2), folding loses the ante.
        ((J, K), [BET], PASS, -1.0, 3.0),
        ((Q, K), [BET], BET, 2.0, 0.0),
        # Second player, jack, facing a bet: calling loses 2 for sure, folding 1.
        ((Q, J), [BET], BET, -2.0, 1.0),
        ((K, J), [BET], PASS, -1.0, 0.0),
        # First player, king, after check and bet: the same sums as the second player's king.
        ((K, Q), [PASS, BET], PASS, -1.0, 3.0),
        # Second player, queen, facing a bet: indifferent, both lose one chip on average.
        ((J, Q), [BET], BET, -1.0, 0.0),
        ((K, Q), [BET], PASS, -1.0, 0.0),
    ],
)
def test_hand_checked_decisions(judge, cards, actions, played, value_played, loss) -> None:
    game = load_game("kuhn_poker")
    v = judge.judge(game, _state(cards, actions), [], played)
    tol = 0.01
    assert v.value_played == pytest.approx(value_played, abs=tol)
    assert v.value_best - v.value_played == pytest.approx(loss, abs=tol)


def test_the_loss_ignores_the_card_the_mover_could_not_see(judge) -> None:
    game = load_game("kuhn_poker")
    # A queen calling a bet: the same verdict whether the bettor held the jack or the king.
    assert judge.judge(game, _state((J, Q), [BET]), [], BET) == judge.judge(
        game, _state((K, Q), [BET]), [], BET
    )


def test_a_record_is_scored_in_chips() -> None:
    game = load_game("kuhn_poker")
    state = game.new_initial_state()
    moves = []
    for i, a in enumerate([J, K, BET, PASS]):  # first player bluffs with the jack, the king folds
        p = state.current_player()
        moves.append(MoveRecord(turn=i, player=p, action=a, text=state.action_to_string(p, a)))
        state.apply_action(a)
    rec = MatchRecord(
        match_id="k1", tournament="t", game=GameSpec(name="kuhn_poker"), seats=["a", "b"], seed=1, moves=moves
    )
    rows = analyse_match(rec, Judges())
    assert [(r.agent, r.seat, r.index) for r in rows] == [("a", 0, 2), ("b", 1, 3)]
    fold = rows[1]
    assert fold.reference.name == "equilibrium" and fold.reference.unit == "chips"
    assert fold.loss == pytest.approx(3.0, abs=0.01) and fold.cls == "blunder"
    assert fold.wc_loss == pytest.approx(1.5, abs=0.01)  # 3 chips of Kuhn's range of 4 (-2..2)
    assert fold.best_text == "Bet"
