"""Seeded agents play the same way whatever else they are doing at the time.

Before, `llm_policy` (and every LLM strategy), `ghost_solver` and `wordnt` drew from one RNG
per agent, shared by every decision in flight, so the same seeded agent answered the same
position differently depending on which other matches it had served before (or at once).
Now each decision has its own RNG from the seed and what the seat sees (`decision_rng`).
Each test answers the same turns in two different orders, one of them concurrently, with two
instances of the same seeded agent, and asks for identical answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from agents.base import MatchContext, Strategy, StrategyOptions
from agents.ghost_solver import GhostSolverStrategy
from agents.llm_policy import LLMPolicyOptions, LLMPolicyStrategy
from agents.wordnt_agent import WordntOptions, WordntStrategy
from bus.protocol import GameSpec, Turn
from games.loader import load_game, replay
from games.view import SeatHistory
from referee.turns import TurnFrame, build_turn
from tests.llm_standins import OpenAIStandIn, Scene

Make = Callable[[], Strategy]


def _turn(spec: GameSpec, actions: list[int], match_id: str) -> Turn:
    game = load_game(spec)
    state = replay(game, actions)
    seat = state.current_player()
    hist = SeatHistory(game.num_players())
    return build_turn(
        TurnFrame(match_id, spec, [f"s{i}" for i in range(game.num_players())], 5000),
        state,
        seat,
        len(actions) + 1,
        hist,
    ).model_copy(update={"state": actions})


async def _answers(make: Make, turns: list[Turn], concurrent: bool) -> list[int | None]:
    bot = make()

    async def one(t: Turn) -> int | None:
        return (await bot.decide(t, MatchContext(match_id=t.match_id))).action

    try:
        if concurrent:
            return list(await asyncio.gather(*(one(t) for t in turns)))
        out: dict[int, int | None] = {}
        for i in reversed(range(len(turns))):  # the other order
            out[i] = await one(turns[i])
        return [out[i] for i in range(len(turns))]
    finally:
        close: Callable[[], Awaitable[None]] | None = getattr(bot, "close", None)
        if close is not None:
            await close()


async def _same_either_way(make: Make, turns: list[Turn]) -> list[int | None]:
    first = await _answers(make, turns, concurrent=True)
    second = await _answers(make, turns, concurrent=False)
    assert first == second
    return first


async def test_llm_strategy_fallbacks_are_reproducible_under_concurrency() -> None:
    # The stand-in model answers prose naming no move: every decision falls back to a random legal
    # move, drawn from the decision's RNG (the path a seeded LLM agent takes on the model's bad
    # output; a server that is down is the provider's failure, not a fallback).
    prose = OpenAIStandIn()
    prose.default = Scene(content="The centre is the best square.")
    url = await prose.start()

    def make() -> Strategy:
        opts = LLMPolicyOptions.model_validate(
            {
                "seed": 7,
                "llm": {"base_url": url, "retries": 0, "timeout_s": 2, "cache": False},
                "mode": "direct",
            }
        )
        return LLMPolicyStrategy(opts)

    spec = GameSpec(name="tic_tac_toe")
    turns = [_turn(spec, list(opening), f"m{i}") for i, opening in enumerate([[], [4], [0], [4, 0], [8, 2]])]
    turns += [t.model_copy(update={"match_id": t.match_id + "b"}) for t in turns]
    try:
        answers = await _same_either_way(make, turns)
    finally:
        await prose.stop()
    assert answers[:5] == answers[5:]  # the match id (it holds a start time) plays no part
    assert len(set(answers)) > 1


GHOST_WORDS = (
    "apple apply band bandit bank cabin cable dodge doge eagle eager fable fabric gable habit idle ideal "
    "jazz kite lemon mango noble ocean piano quilt radio salad table umbra vivid waltz xenon yacht zebra"
).split()


async def test_ghost_solver_is_reproducible_under_concurrency(tmp_path: Path) -> None:
    path = tmp_path / "ghost.txt"
    path.write_text("\n".join(GHOST_WORDS) + "\n", encoding="utf-8")
    spec = GameSpec(name="ghost", params={"words": str(path), "min_word_length": 4})
    # From the empty fragment five letters win (b, d, i, j, k): the choice among them is random.
    turns = [_turn(spec, [], f"g{i}") for i in range(6)] + [_turn(spec, [0], "g9"), _turn(spec, [1], "g8")]

    def make() -> Strategy:
        return GhostSolverStrategy(StrategyOptions(seed=3))

    answers = await _same_either_way(make, turns)
    assert len(set(answers[:6])) == 1  # one view, one answer, whichever match it came from


async def test_wordnt_is_reproducible_under_concurrency(tmp_path: Path) -> None:
    path = tmp_path / "wordnt.txt"
    words = "able abler cable table tables stable bleat blear ablest tablet sable fable gable cabled tabled"
    path.write_text("\n".join(words.split()) + "\n", encoding="utf-8")
    params = {"words": str(path), "players": 2, "rounds": 1, "min_word_length": 4}
    spec = GameSpec(name="wordnt", params=params)
    # After the seat-order chance step (0), "a" (26) leaves a proposal window of six actions.
    turns = [_turn(spec, [0, 26], f"w{i}") for i in range(6)] + [
        _turn(spec, [0], "w9"),
        _turn(spec, [0, 31], "w8"),
    ]

    def make() -> Strategy:
        return WordntStrategy(WordntOptions(seed=5))

    answers = await _same_either_way(make, turns)
    assert len(set(answers[:6])) == 1
