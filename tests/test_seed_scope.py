"""What a tournament file's `seed` fixes, as the README's example file says (issue 43): the schedule
and each match's `match_seed`, so seeded agents replay games without chance move for move; not
chance, which comes from a secret per match (docs/referee.md), so a rerun of the same file deals
anew and only the run folder (the records' secrets) replays a match of chance exactly.

Before, the README said every match's chance was seeded from the file: a rerun gave 36 of 36
identical tic-tac-toe records but 5 of 36 identical Kuhn poker records. Played here through the
real referee and agent runtime on a real nats-server.
"""

from __future__ import annotations

from pathlib import Path

from nats.aio.client import Client as NATS

from agents.base import StrategyOptions
from agents.random_agent import RandomStrategy
from bus.protocol import MatchRecord, MatchSpec
from referee.config import TournamentConfig
from referee.schedule import build_schedule
from tests.helpers import play, serving, uid

README = Path(__file__).resolve().parents[1] / "README.md"


def _config(game: str) -> TournamentConfig:
    return TournamentConfig.model_validate(
        {
            "name": "seedscope",
            "seed": 7,
            "games_per_pairing": 4,  # x 2 seat orders = 8 matches
            "games": [{"name": game}],
            "agents": {"r1": {"kind": "random"}, "r2": {"kind": "random"}},
        }
    )


async def _records(nc: NATS, specs: list[MatchSpec], a: str, b: str) -> list[MatchRecord]:
    named = [s.model_copy(update={"seats": [a if x == "r1" else b for x in s.seats]}) for s in specs]
    return [await play(nc, spec) for spec in named]


def _actions(rec: MatchRecord) -> tuple[int, ...]:
    return tuple(m.action for m in rec.moves)


async def test_the_file_seed_fixes_the_schedule_not_chance_and_the_run_folder_replays(nc: NATS) -> None:
    a, b = uid("seed-a"), uid("seed-b")
    ra, rb = RandomStrategy(StrategyOptions(seed=1)), RandomStrategy(StrategyOptions(seed=2))
    kuhn = _config("kuhn_poker")
    first, second = build_schedule(kuhn, uid("t")), build_schedule(kuhn, uid("t"))
    assert [(s.seed, s.seats) for s in first] == [(s.seed, s.seats) for s in second]
    assert all(x.secret and y.secret and x.secret != y.secret for x, y in zip(first, second, strict=True))
    ttt = build_schedule(_config("tic_tac_toe"), uid("t"))
    async with serving(nc, ra, a), serving(nc, rb, b):
        deals_1 = await _records(nc, first, a, b)
        deals_2 = await _records(nc, second, a, b)
        chance_free_1 = await _records(nc, ttt, a, b)
        chance_free_2 = await _records(nc, build_schedule(_config("tic_tac_toe"), uid("t")), a, b)
        # The run folder's record: its secret (and attempt) replays the first match exactly.
        again = first[0].model_copy(update={"match_id": uid("replay"), "secret": deals_1[0].secret})
        replayed = await _records(nc, [again], a, b)
    assert [_actions(r) for r in chance_free_1] == [_actions(r) for r in chance_free_2]
    differ = sum(_actions(x) != _actions(y) for x, y in zip(deals_1, deals_2, strict=True))
    assert differ > 0, "a rerun of the file dealt every Kuhn poker match the same cards"
    assert _actions(replayed[0]) == _actions(deals_1[0])
    said = " ".join(README.read_text().split())
    assert "only the run folder replays it exactly" in said and "never from this # seed" in said
