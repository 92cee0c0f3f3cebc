"""A seat's `turn` never holds another seat's private information."""

from __future__ import annotations

import pyspiel
import pytest
from nats.aio.msg import Msg

from bus.protocol import Move, Turn
from games.loader import load_game, parse_spec
from games.view import SeatHistory
from referee.turns import TurnFrame, build_turn
from tests.helpers import play, raw_responder, spec, uid

IMPERFECT = [
    "leduc_poker",
    "kuhn_poker",
    "liars_dice",
    "kuhn_poker(players=3)",
    "hand_of_war",
    "quadranto",
    "simplified_holdem",
]


def _turn_after(game_name: str, chance: list[int]) -> Turn | None:
    """Seat 0's first turn after the given chance outcomes, built exactly as the referee builds it."""
    game = load_game(game_name)
    state = game.new_initial_state()
    hist = SeatHistory(game.num_players())
    it = iter(chance)
    while state.is_chance_node():
        a = next(it)
        hist.record(state, -1, a)
        state.apply_action(a)
    while state.current_player() != 0:
        # The first action that does not end the match (a fold would end heads-up hold'em).
        legal = state.legal_actions()
        a = next((x for x in legal if not state.child(x).is_terminal()), legal[0])
        hist.record(state, state.current_player(), a)
        state.apply_action(a)
    return build_turn(
        TurnFrame("m", parse_spec(game_name), [f"s{i}" for i in range(game.num_players())], 1000),
        state,
        0,
        1,
        hist,
    )


@pytest.mark.parametrize(
    ("game", "deal_a", "deal_b"),
    [
        ("leduc_poker", [0, 2], [0, 4]),  # seat 1 holds a different card
        ("kuhn_poker", [0, 1], [0, 2]),
        ("kuhn_poker(players=3)", [0, 1, 2], [0, 3, 1]),
        ("liars_dice", [1, 2], [1, 5]),  # one die each by default
        ("liars_dice(numdice=2)", [1, 2, 3, 4], [1, 2, 5, 0]),
        ("hand_of_war", [0, 1, 2, 3, 4, 5], [0, 1, 2, 13, 14, 15]),  # seat 0 draws three first
        ("quadranto", [5, 10], [5, 15]),  # seat 1 starts on another cell of its quadrant
        ("simplified_holdem", [0, 1, 2, 3], [0, 1, 4, 5]),  # seat 0's two cards come first
        ("simplified_holdem(players=3)", [0, 1, 2, 3, 4, 5], [0, 1, 9, 8, 7, 6]),
    ],
)
def test_turn_does_not_depend_on_opponents_private_chance(
    game: str, deal_a: list[int], deal_b: list[int]
) -> None:
    """Two deals that differ only in what other seats hold give seat 0 the identical turn."""
    n_own = {"leduc_poker": 1, "kuhn_poker": 1, "kuhn_poker(players=3)": 1, "hand_of_war": 3}.get(game, 1)
    if game == "liars_dice(numdice=2)" or game.startswith("simplified_holdem"):
        n_own = 2
    assert deal_a[:n_own] == deal_b[:n_own] and deal_a != deal_b
    ta, tb = _turn_after(game, deal_a), _turn_after(game, deal_b)
    assert ta is not None and tb is not None
    # `sent_at` is the send time: a clock reading, not game information.
    assert ta.model_dump(exclude={"sent_at"}) == tb.model_dump(exclude={"sent_at"})
    assert ta.state is None  # no full history for imperfect-information games


@pytest.mark.parametrize("game", IMPERFECT)
async def test_turns_over_the_bus_hide_other_seats_chance(nc, game: str) -> None:
    g = load_game(game)
    names = [uid(f"p{i}") for i in range(g.num_players())]

    # Hold'em's first legal action is a fold, which would end the match before seat 0 plays.
    pick = -1 if game.startswith("simplified_holdem") else 0

    async def first(turn: Turn, msg: Msg) -> bytes:
        return (
            Move(match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[pick].id)
            .model_dump_json()
            .encode()
        )

    async with raw_responder(nc, names[0], first) as seen0:
        ctxs = [raw_responder(nc, n, first) for n in names[1:]]
        for c in ctxs:
            await c.__aenter__()
        try:
            rec = await play(nc, spec(game, names, seed=11))
        finally:
            for c in ctxs:
                await c.__aexit__(None, None, None)
    assert rec.outcome in ("decisive", "draw"), rec
    assert seen0, "seat 0 was never asked"
    chance_steps = [i for i, m in enumerate(rec.moves) if m.player == -1]
    for turn in seen0:
        assert turn.state is None
        for i, item in enumerate(turn.history):
            if i in chance_steps and item.action is not None:
                # A chance outcome seat 0 may see must be one that its own information state reveals.
                state = g.new_initial_state()
                for m in rec.moves[:i]:
                    state.apply_action(m.action)
                alt = [a for a, _ in state.chance_outcomes() if a != item.action]
                mine = state.clone()
                mine.apply_action(item.action)
                for a in alt:
                    other = state.clone()
                    other.apply_action(a)
                    assert other.information_state_string(0) != mine.information_state_string(0)


def test_perfect_information_turns_carry_the_full_history() -> None:
    game = load_game("backgammon")
    assert game.get_type().information == pyspiel.GameType.Information.PERFECT_INFORMATION
    state = game.new_initial_state()
    hist = SeatHistory(2)
    while state.is_chance_node():
        a = state.legal_actions()[0]
        hist.record(state, -1, a)
        state.apply_action(a)
    turn = build_turn(
        TurnFrame("m", parse_spec("backgammon"), ["a", "b"], 1000), state, state.current_player(), 1, hist
    )
    assert turn.state == list(state.history())
    assert all(h.action is not None for h in turn.history)


def test_word_games_send_a_json_view() -> None:
    game = load_game("ghost")
    state = game.new_initial_state()
    state.apply_action(0)
    turn = build_turn(TurnFrame("m", parse_spec("ghost"), ["a", "b"], 1000), state, 1, 1, None)
    assert turn.observation_json == {"fragment": "a", "to_move": 1, "min_word_length": 5, "loser": None}
