"""The example bots that play well (examples/bots/chess_bot.js with a UCI engine, connect_four_bot.js
with alpha-beta search, go_bot's perfect tic-tac-toe) pass `bot-check` and beat `random` in real
matches through the referee.

Skipped, saying why, where node, the bots' `nats` package (`npm ci` in examples/bots), stockfish, or
Go and Debian's nats.go are missing (tests/example_bots.py)."""

from __future__ import annotations

import json
import random
import shutil
import subprocess

import chess
import pytest

from agents.random_agent import RandomStrategy
from games.chess.uci import action_to_move, uci_to_action
from games.loader import load_game
from referee.botcheck import BotChecker, BotCheckOptions
from tests.example_bots import BOTS, running_bot
from tests.helpers import play, serving, spec, uid


async def _wins(
    nc, url: str, kind: str, game: str, games: int, *extra: str, max_turns: int = 400
) -> list[float]:
    """The bot's return in each of `games` matches against `random`, seat orders alternating.
    Fixed names: a seeded agent's draw hashes the seats, so names new each run (`uid`) made the
    same seeds draw other games, and the go bot once won one tic-tac-toe game of 4 under load."""
    bot, rand = f"{kind.replace('_', '-')}-wins", "rand-wins"
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


DECODE = """
const { Board } = require("./chess_ids");
const games = JSON.parse(require("fs").readFileSync(0, "utf8"));
console.log(JSON.stringify(games.map((g) => {
  const b = new Board();
  return g.ids.map((id, i) => [b.id(g.ucis[i]), b.play(id)]);
})));
"""


def test_the_chess_bots_ids_are_openspiels() -> None:
    """examples/bots/chess_ids.js (what docs/games.md says of chess ids, in JavaScript) turns every
    id of random games into the UCI move games/chess/uci.py gives, and back: castling, en passant
    and promotions included."""
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the chess bot's id decoding cannot run")
    game, rng = load_game("chess"), random.Random(5)
    games: list[dict[str, list[int] | list[str]]] = []
    special: set[str] = set()  # which kinds of special move the games hold
    # The first game opens with an en passant capture (rare in random play), then goes on at random.
    for opening in (["e2e4", "a7a6", "e4e5", "d7d5", "e5d6"], *[[]] * 11):
        state, board = game.new_initial_state(), chess.Board()
        ids: list[int] = []
        ucis: list[str] = []
        while not state.is_terminal() and len(ids) < 300:
            if len(ids) < len(opening):
                action = uci_to_action(board, opening[len(ids)])
            else:
                action = rng.choice(state.legal_actions())
            move = action_to_move(board, action)
            special |= {
                k
                for k, f in (("castling", board.is_castling), ("en passant", board.is_en_passant))
                if f(move)
            }
            special |= {"underpromotion"} if move.promotion not in (None, chess.QUEEN) else set()
            board.push(move)
            ids.append(action)
            ucis.append(move.uci())
            state.apply_action(action)
        games.append({"ids": ids, "ucis": ucis})
    out = subprocess.run(
        [node, "-e", DECODE], input=json.dumps(games), capture_output=True, text=True, cwd=BOTS, check=True
    )
    got = json.loads(out.stdout)
    want = [[[i, u] for i, u in zip(g["ids"], g["ucis"], strict=True)] for g in games]
    assert got == want
    assert special == {"castling", "en passant", "underpromotion"}
