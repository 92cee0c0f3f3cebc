"""Opening sets: FENs and move sequences in the tournament file become per-match `fen`
parameters, each opening with both colour assignments; a bad one names its line."""

from __future__ import annotations

import pytest

from bus.protocol import GameSpec
from games.chess.openings import opening_fen, opening_params
from games.loader import GameSpecError, initial_state, load_game
from referee.config import ConfigError, parse_config
from referee.schedule import build_schedule

BASE = """
name = "open"
games_per_pairing = 1
openings = [
  "1. e4 e5 2. Nf3 Nc6",
  "d2d4 g8f6",
  "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
]
[[games]]
name = "chess"
[[games]]
name = "tic_tac_toe"
[agents.a]
kind = "random"
[agents.b]
kind = "first"
"""


def test_openings_scheduled_with_both_colours() -> None:
    config = parse_config(BASE)
    specs = build_schedule(config, "t")
    chess_specs = [s for s in specs if s.game.name == "chess"]
    assert len(chess_specs) == 6 and len(specs) == 8  # tic-tac-toe: no openings, 2 orders
    fens = [str(s.game.params["fen"]) for s in chess_specs]
    assert fens[0] == opening_fen("e4 e5 Nf3 Nc6")
    for fen in set(fens):
        assert sorted(tuple(s.seats) for s in chess_specs if s.game.params["fen"] == fen) == [
            ("a", "b"),
            ("b", "a"),
        ]
        state = initial_state(load_game(chess_specs[0].game.model_copy(update={"params": {"fen": fen}})))
        assert str(state).split()[:2] == fen.split()[:2]
    assert "fen" not in next(s for s in specs if s.game.name == "tic_tac_toe").game.params
    # A move sequence travels as its UCI moves too (PGN shows them); a FEN entry has none.
    openings = [s.game.params.get("opening") for s in chess_specs]
    assert openings == ["e2e4 e7e5 g1f3 b8c6"] * 2 + ["d2d4 g8f6"] * 2 + [None] * 2
    state = initial_state(load_game(chess_specs[0].game))
    assert str(state).split()[:2] == fens[0].split()[:2]


def test_an_opening_that_does_not_reach_the_fen_is_refused() -> None:
    params = {**opening_params("e4 e5"), "opening": "d2d4 d7d5"}
    with pytest.raises(GameSpecError, match="reaches"):
        load_game(GameSpec(name="chess", params=params))
    with pytest.raises(GameSpecError, match="not legal"):
        load_game(GameSpec(name="chess", params={**params, "opening": "e2e5"}))


@pytest.mark.parametrize(
    ("bad", "words"),
    [("e4 e5 Ke3", "move 3 'Ke3' is not legal"), ("8/8/8/8/8/8/8/8 w - - 0 1", "illegal position")],
)
def test_bad_opening_names_the_line(bad: str, words: str) -> None:
    text = BASE.replace('"d2d4 g8f6"', f'"{bad}"')
    with pytest.raises(ConfigError) as err:
        parse_config(text, "t.toml")
    assert "t.toml:4: openings.1" in str(err.value) and words in str(err.value)


def test_paper_examples_seat_the_agents_as_the_paper_does() -> None:
    from pathlib import Path

    from referee.config import load_config

    root = Path(__file__).resolve().parents[1] / "examples"
    go = load_config(root / "minigo.toml")
    specs = build_schedule(go, "t")
    # Go: seat 0 is black; every agent is black against MCTS-1000, 20 games each.
    assert {s.seats[1] for s in specs} == {"mcts1000"} and len(specs) == 20 * (len(go.agents) - 1)
    chess = load_config(root / "chess_vs_stockfish.toml")
    vs_stockfish = [s for s in build_schedule(chess, "t") if s.seats[0].startswith("stockfish")]
    # Chess: seat 1 is white; the agents are white against Stockfish levels 1, 2, 3.
    assert {s.seats[0] for s in vs_stockfish} == {"stockfish1", "stockfish2", "stockfish3"}
    assert {s.seats[1] for s in vs_stockfish} == {"llm_mcts", "llm_vote", "mcts"}
