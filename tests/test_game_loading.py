"""Games off the referee's loop (issue 10, item 1): a first load runs in a thread, and Word
chain's thousands of legal actions are built in one call, not one pyspiel round trip each."""

from __future__ import annotations

import asyncio

import pytest

from games.loader import GameSpecError, load_game, load_game_async
from games.view import action_text, legal_actions
from games.word import word_chain


async def test_a_first_load_does_not_block_the_loop() -> None:
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0)
            ticks += 1

    ticker = asyncio.create_task(tick())
    try:
        # A spec no other test loads: Ghost reads and indexes its word list (a few hundred ms).
        game = await load_game_async("ghost(min_word_length=7)")
    finally:
        ticker.cancel()
    assert game.get_type().short_name == "ghost"
    # Other tasks ran while the game loaded; a blocking load would have left them none.
    assert ticks > 0
    # Cached now: the same object, and no thread needed.
    assert await load_game_async("ghost(min_word_length=7)") is game is load_game("ghost(min_word_length=7)")


def test_word_chain_legal_actions_in_one_call(monkeypatch: pytest.MonkeyPatch) -> None:
    state = load_game("word_chain(first_letter=s)").new_initial_state()
    expected = [(a, action_text(state, 0, a)) for a in state.legal_actions(0)]
    assert len(expected) > 1000
    calls = 0
    real = word_chain.WordChainState._action_to_string

    def counting(self: word_chain.WordChainState, player: int, action: int) -> str:
        nonlocal calls
        calls += 1
        return real(self, player, action)

    monkeypatch.setattr(word_chain.WordChainState, "_action_to_string", counting)
    got = legal_actions(state, 0)
    assert [(la.id, la.text) for la in got] == expected
    assert calls == 0  # not one pyspiel round trip per word
    assert legal_actions(state, 1) == []  # not this seat's turn


START = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("chess(fen=8/8/8/8/8/8/8/8 w - - 0 1)", "illegal position"),
        (f"chess(fen={START},chess960=true)", "fen and chess960 cannot be combined"),
        # Was a raw SpielError: the chess-with-fen path skipped the loader's error wrapping.
        (f"chess(fen={START},speed=3)", "Unknown parameter 'speed'"),
    ],
)
def test_a_bad_chess_start_is_a_game_spec_error(spec: str, says: str) -> None:
    with pytest.raises(GameSpecError, match=says):
        load_game(spec)
