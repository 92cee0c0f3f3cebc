"""The referee's turn bytes (`encode_turn`, no per-turn model) are exactly the `Turn` model's JSON.

Played through seeded random playouts of perfect- and imperfect-information, chance and
simultaneous games, with structured views (`observation_json`, None values included), hidden
history steps, and with and without the optional OpenSpiel tensors; at every decision, for every
seat to move, the bytes must equal `build_turn(...).model_dump_json(exclude_none=True)` with the
same `sent_at`.
"""

from __future__ import annotations

import random
from typing import Any

import pyspiel
import pytest

from bus.protocol import BudgetLimits, GameSpec, Turn, TurnBudget
from games.loader import initial_state, load_game, parse_spec
from games.view import CHANCE, GameFacts, SeatHistory, action_text, legal_actions
from referee.turns import TurnFrame, build_turn, encode_turn

GAMES = [
    "tic_tac_toe",
    "leduc_poker",  # imperfect information and chance
    "kuhn_poker(players=3)",
    "goofspiel(num_cards=4)",  # simultaneous
    "backgammon",  # chance, perfect information
    "ghost",  # a Python game with a JSON view holding null
    "mnk(m=4,n=4,k=3)",  # a C++ game whose JSON view is built outside
    "simplified_holdem(players=3)",
]


def _bytes_of_both(
    state: pyspiel.State,
    spec: GameSpec,
    facts: GameFacts,
    hist: SeatHistory,
    seat: int,
    turn_no: int,
    rules: str | None,
    retry: str | None,
    tensors: bool = False,
) -> tuple[bytes, bytes]:
    # Odd seats' frames read the game's facts from the state, even seats' are given them.
    frame = TurnFrame(
        "m-ü", spec, [f"s{i}" for i in range(facts.num_players)], 1234, facts=None if seat % 2 else facts
    )
    # Every third turn carries an LLM budget (a cap and what is left; unset caps left out).
    budget = TurnBudget(
        per_move=BudgetLimits(llm_calls=8), left=BudgetLimits(tokens=turn_no * 100, llm_calls=0)
    )
    kw: dict[str, Any] = dict(
        rules=rules, retry=retry, legal=legal_actions(state, seat), tensors=tensors,
        budget=budget if turn_no % 3 == 0 else None,
    )  # fmt: skip
    encoded = encode_turn(frame, state, seat, turn_no, hist, **kw)
    model = build_turn(frame, state, seat, turn_no, hist, **kw).model_copy(
        update={"sent_at": encoded.sent_at}
    )
    expected = model.model_dump_json(exclude_none=True).encode()
    # A seat in the referee's own process (a training environment's learner) gets the model, not
    # the bytes (referee/request.py, ask_local): it must be the turn an agent validates from them,
    # with a history of its own that the match's later moves do not change.
    assert Turn.model_validate_json(encoded.data) == model
    assert model.history == hist.items[seat] and model.history is not hist.items[seat]
    # A turn asked again carries a new `sent_at` and nothing else new.
    later = encoded.stamped(encoded.sent_at + 0.5)
    again = model.model_copy(update={"sent_at": encoded.sent_at + 0.5}).model_dump_json(exclude_none=True)
    assert later.data == again.encode()
    assert (later.match_id, later.turn) == (model.match_id, model.turn)
    # Tensors only when asked for (training): every other turn keeps its bytes.
    assert (b"_tensor" in encoded.data) == (
        tensors and (facts.information_state_tensor or facts.observation_tensor)
    )
    return encoded.data, expected


@pytest.mark.parametrize("name", GAMES)
def test_encoded_turns_are_the_models_bytes(name: str) -> None:
    spec = parse_spec(name)
    game = load_game(spec)
    facts = GameFacts.of(game)
    state = initial_state(game)
    hist = SeatHistory(facts.num_players)
    rng = random.Random(17)
    turn_no = 0
    checked = 0
    while not state.is_terminal() and turn_no < 60:
        turn_no += 1
        # Some turns carry the rules or a retry reason (non-ASCII text on purpose).
        rules = 'Règles: ☃ "quoted"\n' if turn_no % 3 == 1 else None
        retry = "illegal: id 9 is not a legal action ✗" if turn_no % 4 == 2 else None
        if state.is_chance_node():
            outcomes, probs = zip(*state.chance_outcomes(), strict=True)
            action = rng.choices(outcomes, weights=probs)[0]
            hist.record(state, CHANCE, action, text=action_text(state, CHANCE, action), facts=facts)
            state.apply_action(action)
        elif state.is_simultaneous_node():
            seats = [p for p in range(facts.num_players) if state.legal_actions(p)]
            joint = [0] * facts.num_players
            for p in seats:
                got, want = _bytes_of_both(
                    state, spec, facts, hist, p, turn_no, rules, retry, tensors=turn_no % 2 == 0
                )
                assert got == want
                checked += 1
                joint[p] = rng.choice(state.legal_actions(p))
            for p in seats:
                hist.record(state, p, joint[p], joint, facts=facts)
            state.apply_actions(joint)
        else:
            seat = state.current_player()
            got, want = _bytes_of_both(
                state, spec, facts, hist, seat, turn_no, rules, retry, tensors=turn_no % 2 == 0
            )
            assert got == want
            Turn.model_validate_json(got)  # and an agent takes it
            checked += 1
            action = rng.choice(state.legal_actions(seat))
            hist.record(state, seat, action, facts=facts)
            state.apply_action(action)
    assert checked >= 2


def test_hidden_steps_and_null_views_are_covered() -> None:
    """The playouts above meet what the encoder must get right: hidden history items (fields left
    out) and a JSON view holding null (kept, as the model keeps it)."""
    game = load_game("leduc_poker")
    facts = GameFacts.of(game)
    state = initial_state(game)
    hist = SeatHistory(2)
    for action in (0, 1):  # each seat's private card: hidden from the other
        hist.record(state, CHANCE, action, facts=facts)
        state.apply_action(action)
    assert b'{"player":-1}' in hist.encoded[0]
    ghost = load_game("ghost")
    gs = initial_state(ghost)
    encoded = encode_turn(TurnFrame("m", parse_spec("ghost"), ["a", "b"], 1000), gs, 0, 1, None)
    assert b'"loser":null' in encoded.data


def test_legal_entries_are_shared_between_matches_and_their_cache_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import games.view as view

    game = load_game(parse_spec("tic_tac_toe"))
    known: dict[tuple[int, str], Any] = {}
    first = legal_actions(initial_state(game), 0, known)
    # Another match's first turn: the same entries, not new ones.
    assert all(a is b for a, b in zip(first, legal_actions(initial_state(game), 0, known), strict=True))
    monkeypatch.setattr(view, "KNOWN_MAX", 12)
    state = initial_state(game)
    state.apply_action(4)
    for _ in range(3):  # eight new texts (o's) on top of nine: emptied on the way, never past the cap
        entries = legal_actions(state, 1, known)
        assert len(known) <= 12
        assert [(e.id, e.text) for e in entries] == [
            (a, action_text(state, 1, a)) for a in state.legal_actions(1)
        ]
