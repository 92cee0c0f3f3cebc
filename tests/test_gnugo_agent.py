"""The `gnugo` agent through the real referee and bus: legal Go on the game's board size and komi,
bot-check passes, a killed engine costs one recorded `error` and the next match gets a new one;
and the dead-stone-aware score (GNU Go's `final_score`) beside the Tromp-Taylor area, on a game
where they disagree."""

from __future__ import annotations

import asyncio
import math
import os
import signal
import sys
from pathlib import Path

import pytest
from rich.console import Console

from agents.base import Decision, MatchContext
from agents.gnugo_agent import GnuGoOptions, GnuGoStrategy
from agents.random_agent import RandomStrategy
from agents.registry import strategy_class
from bus.protocol import GameSpec, MatchRecord, MoveRecord, Turn
from games.go.gnugo import find_gnugo
from games.go.score import tromp_taylor_score
from referee.botcheck import BotChecker, BotCheckOptions
from spielbus.go_report import gnugo_scores, go_rows, print_go_scores
from tests.helpers import play, serving, spec, uid

pytestmark = pytest.mark.skipif(find_gnugo() is None, reason="gnugo not installed: make system-deps")

GO5 = GameSpec(name="go", params={"board_size": 5, "komi": 0.5})
# 5x5: black walls column C, white column D, then a lone white stone on a3 inside black's side;
# both pass. Tromp-Taylor counts a3 for white and A-B as nobody's: black 5, white 11. GNU Go
# takes a3 as dead: black 15, white 10.
DEAD_STONE_GAME = [2, 3, 7, 8, 12, 13, 17, 18, 22, 23, 25, 10, 25, 25]


def _gnugo(**kw: object) -> GnuGoStrategy:
    return GnuGoStrategy(GnuGoOptions.model_validate({"level": 1, **kw}))


def _random() -> RandomStrategy:
    return RandomStrategy(RandomStrategy.Options(seed=3))


def test_registered_and_missing_binary_is_an_option_error() -> None:
    assert strategy_class("gnugo") is GnuGoStrategy
    with pytest.raises(ValueError, match="apt-get install gnugo"):
        GnuGoOptions(path="/nonexistent/gnugo")


async def test_plays_legal_go_through_the_referee(nc) -> None:
    go, rnd = uid("gnugo"), uid("rnd")
    strategy = _gnugo()
    async with serving(nc, strategy, go), serving(nc, _random(), rnd):
        as_black = await play(nc, spec(GO5, [go, rnd], deadline_ms=60_000))
        as_white = await play(
            nc, spec(GameSpec(name="go", params={"board_size": 7}), [rnd, go], deadline_ms=60_000)
        )
    await strategy.close()
    for rec in (as_black, as_white):
        assert not rec.faults and rec.outcome in ("decisive", "draw")
        assert any(m.agent == go for m in rec.moves)
    # GNU Go beats a random player from either side (it captures dead stones before passing).
    assert as_black.returns[0] > 0 and as_white.returns[1] > 0
    assert all((m.note or "").startswith("gtp ") for m in as_black.moves if m.agent == go)


async def test_bot_check_passes(nc) -> None:
    name = uid("gnugo")
    opts = BotCheckOptions(
        games=["go(board_size=5,komi=0.5)"],
        concurrent_game="go(board_size=5)",
        turn_game="go(board_size=5,komi=0.5)",
        concurrency=2,
        deadline_ms=60_000,
    )
    strategy = _gnugo()
    async with serving(nc, strategy, name):
        results = await BotChecker(nc, name, options=opts).run()
    await strategy.close()
    assert all(r.ok for r in results), [r for r in results if not r.ok]


class _KillsItsEngineAfterItsFirstMove(GnuGoStrategy):
    """Kills its engine once its first move is made and waits until it is dead, before answering:
    so the engine is dead between two turns. (Killing it from the referee's `moved` event raced the
    next turn: events go out while the match goes on, and under load the next turn met the engine
    dying mid-move.)"""

    def __init__(self) -> None:
        super().__init__(GnuGoOptions.model_validate({"level": 1}))
        self.killed: list[int] = []

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        decision = await super().decide(turn, ctx)
        if not self.killed:
            pid = self.engine_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)
            for _ in range(1000):
                if self.engine_pid != pid:
                    break
                await asyncio.sleep(0.01)
        return decision


async def test_a_killed_engine_is_replaced_on_the_next_turn(nc) -> None:
    go, rnd = uid("gnugo"), uid("rnd")
    strategy = _KillsItsEngineAfterItsFirstMove()
    async with serving(nc, strategy, go), serving(nc, _random(), rnd):
        rec = await play(nc, spec(GO5, [go, rnd], deadline_ms=60_000))
    await strategy.close()
    assert strategy.killed and strategy.restarts == 1
    assert not rec.faults and rec.returns[0] > 0


async def test_an_engine_dying_mid_move_is_an_error(nc, tmp_path: Path) -> None:
    """A stand-in engine (a Python script, since GNU Go does not die on demand) that answers every
    command but exits on its first move request: that move fails as a recorded `error`."""
    script = tmp_path / "dying-gnugo"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        "for line in sys.stdin:\n"
        "    cid, cmd = line.split()[:2]\n"
        "    if 'genmove' in cmd:\n"
        "        sys.exit(1)\n"
        "    print(f'={cid}\\n', flush=True)\n"
    )
    script.chmod(0o755)
    go, rnd = uid("gnugo"), uid("rnd")
    strategy = _gnugo(path=str(script))
    async with serving(nc, strategy, go), serving(nc, _random(), rnd):
        rec = await play(nc, spec(GO5, [go, rnd], deadline_ms=60_000))
    await strategy.close()
    assert [f.reason for f in rec.faults] == ["error"] and rec.faults[0].agent == go
    assert "gnugo engine failed" in rec.faults[0].detail and "exited" in rec.faults[0].detail
    assert rec.outcome == "forfeit" and rec.forfeited == [0]


def _record(moves: list[int], returns: list[float]) -> MatchRecord:
    return MatchRecord(
        match_id=uid("m"),
        tournament="t",
        game=GO5,
        seats=["b", "w"],
        seed=0,
        moves=[MoveRecord(turn=i, player=i % 2, action=a, text=str(a)) for i, a in enumerate(moves)],
        returns=returns,
        outcome="decisive",
    )


def test_dead_stones_scored_two_ways() -> None:
    rec = _record(DEAD_STONE_GAME, [-1.0, 1.0])  # OpenSpiel's verdict: white wins on area
    assert tromp_taylor_score(rec) == 5 - 11
    scored = gnugo_scores([rec])
    assert scored is not None
    dead, failed = scored
    assert dead == {rec.match_id: 15.0 - 10.0} and failed == 0
    rows = go_rows([rec], dead)
    assert (rows["b"]["mean_score"], rows["b"]["gnugo_score"]) == (-6.0, 5.0)
    assert (rows["w"]["mean_score"], rows["w"]["gnugo_score"]) == (6.0, -5.0)
    assert math.isnan(rows["w"]["gnugo_as_black"])  # white never played black
    console = Console(record=True, width=200)
    print_go_scores(console, [rec])
    text = console.export_text()
    assert (
        "Tromp-Taylor" in text
        and "GNU Go own" in text
        and "dead stones removed" in text
        and "+5.0" in text
        and "-6.0" in text
    )
    # Table 3's report says which of the two is the paper's territory.
    assert "Table 3's territory is the GNU Go columns" in " ".join(text.split())
