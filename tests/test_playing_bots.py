"""The example bots that play well (examples/bots/chess_bot.js with a UCI engine, connect_four_bot.js
with alpha-beta search, go_bot's perfect tic-tac-toe) pass `bot-check` and beat `random` in real
matches through the referee.

Skipped, saying why, where node, the bots' `nats` package (`npm ci` in examples/bots), stockfish, or
Go and Debian's nats.go are missing (tests/example_bots.py)."""

from __future__ import annotations

import pytest

from agents.random_agent import RandomStrategy
from referee.botcheck import BotChecker, BotCheckOptions
from tests.example_bots import running_bot
from tests.helpers import play, serving, spec, uid


async def _wins(
    nc, url: str, kind: str, game: str, games: int, *extra: str, max_turns: int = 400
) -> list[float]:
    """The bot's return in each of `games` matches against `random`, seat orders alternating."""
    bot, rand = uid(kind.replace("_", "-")), uid("rand")
    returns = []
    async with (
        running_bot(kind, bot, url, nc, *extra),
        serving(nc, RandomStrategy.from_options({"seed": 7}), rand),
    ):
        for i in range(games):
            seats = [bot, rand] if i % 2 == 0 else [rand, bot]
            record = await play(nc, spec(game, seats, seed=i + 1, deadline_ms=5000, max_turns=max_turns))
            assert record.faults == [], record.faults
            returns.append(record.returns[seats.index(bot)])
    return returns


@pytest.mark.slow
async def test_connect_four_bot_beats_random_every_game(nc, nats_url: str) -> None:
    assert await _wins(nc, nats_url, "node_connect_four", "connect_four", 4) == [1.0] * 4


@pytest.mark.slow
async def test_chess_bot_with_stockfish_beats_random_every_game(nc, nats_url: str) -> None:
    returns = await _wins(nc, nats_url, "node_chess", "chess", 2, "--movetime", "20")
    assert returns == [1.0, 1.0]


async def test_go_bot_never_loses_tic_tac_toe_to_random_and_wins_some(nc, nats_url: str) -> None:
    returns = await _wins(nc, nats_url, "go", "tic_tac_toe", 4)
    assert min(returns) >= 0.0 and sum(returns) >= 2.0, returns


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "games", "extra"),
    [
        ("go", ["tic_tac_toe", "connect_four", "kuhn_poker", "liars_dice"], ()),
        ("node_connect_four", ["connect_four", "tic_tac_toe", "kuhn_poker", "liars_dice"], ()),
        ("node_chess", ["chess", "tic_tac_toe", "kuhn_poker"], ("--movetime", "5")),
    ],
)
async def test_playing_bots_pass_bot_check(
    nc, nats_url: str, kind: str, games: list[str], extra: tuple[str, ...]
) -> None:
    name = uid(kind.replace("_", "-"))
    async with running_bot(kind, name, nats_url, nc, *extra):
        results = await BotChecker(nc, name, options=BotCheckOptions(games=games, concurrency=4)).run()
    failed = [f"{r.name}: {r.detail}" for r in results if not r.ok]
    assert not failed, failed
    assert len(results) == 5 + len(games) + 1
