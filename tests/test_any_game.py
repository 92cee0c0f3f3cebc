"""Any OpenSpiel game by name and parameters plays through the bus: chance, hidden information,
simultaneous moves, more than two players; and `mcts` plays perfect and imperfect information."""

from __future__ import annotations

import contextlib

import pytest

from agents.base import StrategyOptions
from agents.mcts_agent import MctsOptions, MctsStrategy
from agents.random_agent import RandomStrategy
from bus.protocol import MatchEvent
from games.loader import load_game
from tests.helpers import play, serving, spec, uid

GAMES = [
    "tic_tac_toe",
    "connect_four",
    "leduc_poker",
    "liars_dice",
    "backgammon",
    "goofspiel(num_cards=5)",
    "kuhn_poker(players=3)",
    "oshi_zumo",
    # The new games of the Code World Models paper (games/cwm).
    "mnk(m=6,n=6,k=4)",
    "hand_of_war",
    "quadranto",
    "army5x5a",
    "simplified_holdem(players=3)",
]


@pytest.mark.parametrize("game", GAMES)
async def test_random_agents_finish_any_game(nc, game: str) -> None:
    n = load_game(game).num_players()
    names = [uid("r") for _ in range(n)]
    events: list[MatchEvent] = []
    async with contextlib.AsyncExitStack() as stack:
        for i, name in enumerate(names):
            await stack.enter_async_context(serving(nc, RandomStrategy(StrategyOptions(seed=i)), name))
        rec = await play(nc, spec(game, names, seed=5, max_turns=5000), events)
    assert rec.faults == [], rec.faults
    assert rec.outcome in ("decisive", "draw")
    assert len(rec.returns) == n and len(rec.ranks) == n
    assert events[0].type == "started" and events[-1].type == "ended"
    assert sum(1 for e in events if e.type == "moved") == len(rec.moves)
    if not load_game(game).get_type().information.name == "PERFECT_INFORMATION":
        # Spectators see private steps only in the ended event's record.
        hidden = [e for e in events if e.type == "moved" and e.hidden]
        assert all(e.move is not None and e.move.action == -1 for e in hidden)


# How many games make "mcts won overall" all but certain. The agents' names are new each run and
# are part of every seeded decision, so each run plays other games. MCTS's return per game against
# random, measured over 40 runs of 24 games: tic-tac-toe 0.90 (sd 0.34), liar's dice 0.74 (0.67),
# Leduc 1.43 (4.19 chips). 24 Leduc games sum to at most zero about one run in twenty (a loaded run
# saw -4); 240 put zero over five standard deviations below the expected sum.
MCTS_GAMES = {"tic_tac_toe": 24, "leduc_poker": 240, "liars_dice": 24}


@pytest.mark.parametrize("game", list(MCTS_GAMES))
async def test_mcts_beats_or_matches_random(nc, game: str) -> None:
    mc, rnd = uid("mcts"), uid("rand")
    opts = MctsOptions(simulations=60, rollouts=2, seed=1)
    # ISMCTS also stops at 60% of the deadline: a deadline no search reaches leaves the simulation
    # count as its only budget, however loaded the machine.
    roomy = 120_000
    async with serving(nc, MctsStrategy(opts), mc), serving(nc, RandomStrategy(StrategyOptions(seed=2)), rnd):
        recs = [
            await play(nc, spec(game, [mc, rnd] if i % 2 == 0 else [rnd, mc], seed=i, deadline_ms=roomy))
            for i in range(MCTS_GAMES[game])
        ]
    assert all(r.faults == [] for r in recs)
    searched = {m.stats.nodes for r in recs for m in r.moves if m.agent == mc and m.stats is not None}
    assert searched == {opts.simulations}, searched
    mcts_return = sum(r.returns[r.seats.index(mc)] for r in recs)
    assert mcts_return > 0, f"mcts lost overall at {game}: {mcts_return}"


CWM_GAMES = ["mnk(m=6,n=6,k=4)", "hand_of_war", "quadranto", "army5x5a"]


@pytest.mark.parametrize("game", CWM_GAMES)
async def test_mcts_plays_the_code_world_models_games(nc, game: str) -> None:
    """The new games of the Code World Models paper: mcts (MCTS or ISMCTS) finishes a match."""
    mc, rnd = uid("mcts"), uid("rand")
    async with (
        serving(nc, MctsStrategy(MctsOptions(simulations=20, rollouts=1, seed=1)), mc),
        serving(nc, RandomStrategy(StrategyOptions(seed=2)), rnd),
    ):
        rec = await play(nc, spec(game, [rnd, mc], seed=7))
    assert rec.faults == [], rec.faults
    assert rec.outcome in ("decisive", "draw")
    assert any(m.agent == mc for m in rec.moves)


def test_determinization_never_reuses_a_known_private_outcome() -> None:
    """Seat 2 of 3-player Kuhn holds card 2; no sampled world may deal card 2 to anyone else."""
    import random

    from agents.mcts_agent import determinize
    from bus.protocol import HistoryItem
    from games.view import seat_info

    game = load_game("kuhn_poker(players=3)")
    true = game.new_initial_state()
    for a in [0, 3, 2, 0, 1]:
        true.apply_action(a)
    hidden = [HistoryItem(player=-1), HistoryItem(player=-1), HistoryItem(player=-1, action=2)]
    history = [*hidden, HistoryItem(player=0, action=0), HistoryItem(player=1, action=1)]
    rng = random.Random(0)
    for _ in range(50):
        state, ok = determinize(game, history, 2, seat_info(true, 2), rng, tries=20)
        assert ok
        cards = state.history()[:3]
        assert cards[2] == 2 and 2 not in cards[:2] and len(set(cards)) == 3


async def test_mcts_plays_a_python_game(nc) -> None:
    """Our word games are Python games: mcts must use a search that works on them."""
    mc, rnd = uid("mcts"), uid("rand")
    async with (
        serving(nc, MctsStrategy(MctsOptions(simulations=30, rollouts=1, seed=1)), mc),
        serving(nc, RandomStrategy(StrategyOptions(seed=2)), rnd),
    ):
        rec = await play(nc, spec("ghost", [mc, rnd], seed=4))
    assert rec.faults == [], rec.faults
    assert rec.outcome in ("decisive", "draw")
    assert any(m.agent == mc for m in rec.moves)


def test_first_turn_rules_come_from_the_game() -> None:
    from games.rules import rules_text

    ghost = rules_text(load_game("ghost(min_word_length=6)"))
    assert ghost.startswith("Ghost.") and "at least 6 letters" in ghost
    assert "legal actions" in rules_text(load_game("tic_tac_toe"))
    generic = rules_text(load_game("oshi_zumo"))
    assert "oshi_zumo" in generic and "2 players" in generic


async def test_seeded_agents_replay_a_match_exactly(nc) -> None:
    """Referee chance comes from the match's secret; a seeded agent decides by its seed and its view
    alone. The record's secret and attempt replay the match (docs/referee.md)."""
    mc, rnd = uid("mcts"), uid("rand")
    async with (
        serving(nc, MctsStrategy(MctsOptions(simulations=40, rollouts=1, seed=5)), mc),
        serving(nc, RandomStrategy(StrategyOptions(seed=6)), rnd),
    ):
        first = spec("leduc_poker", [mc, rnd], seed=21)
        a = await play(nc, first)
        assert a.secret and a.attempt == 1
        again = first.model_copy(update={"secret": a.secret})
        # Another match in between must not shift either agent's random stream.
        await play(nc, spec("leduc_poker", [rnd, mc], seed=3))
        b = await play(nc, again)
    assert [(m.player, m.action) for m in a.moves] == [(m.player, m.action) for m in b.moves]
    assert a.returns == b.returns
