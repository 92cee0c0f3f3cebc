"""The `stockfish` agent through the real referee and bus: it plays legal chess (from a FEN too),
a missing binary is exit 2 with the install hint, and an engine killed mid-game costs one
recorded `error` while the next match gets a fresh engine."""

from __future__ import annotations

import asyncio
import os
import signal

import chess
import chess.engine
import pytest

from agents.base import Decision, DecisionLimit, MatchContext
from agents.cli import main as agent_main
from agents.random_agent import FirstLegalStrategy
from agents.stockfish_agent import StockfishOptions, StockfishStrategy, _Engine, find_stockfish
from bus.protocol import GameSpec, MatchSpec, Turn
from tests.helpers import play, serving, spec, uid

pytestmark = pytest.mark.skipif(find_stockfish() is None, reason="stockfish not installed (make system-deps)")


def _sf(**kw: object) -> StockfishStrategy:
    return StockfishStrategy(StockfishOptions(movetime_ms=20, **kw))


def _first() -> FirstLegalStrategy:
    return FirstLegalStrategy(FirstLegalStrategy.Options())


def test_missing_binary_is_exit_2_with_install_hint(capsys: pytest.CaptureFixture[str]) -> None:
    code = agent_main(["stockfish", "--name", "sf", "--path", "/nonexistent/stockfish", "--check"])
    assert code == 2
    assert "apt-get install stockfish" in capsys.readouterr().err


async def test_mates_from_fen(nc) -> None:
    sf, first = uid("sf"), uid("first")
    game = GameSpec(name="chess", params={"fen": "6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1"})
    # A depth, not a movetime: 20 ms of wall clock on a loaded machine may end before depth 1.
    strategy = StockfishStrategy(StockfishOptions(depth=4))
    async with serving(nc, strategy, sf), serving(nc, _first(), first):
        # OpenSpiel's chess seats black first: seat 0 is black, seat 1 white (to move here).
        rec = await play(nc, spec(game, [first, sf]))
    await strategy.close()
    assert [(m.agent, m.text) for m in rec.moves] == [(sf, "Rd8#")]
    assert rec.returns == [-1.0, 1.0] and not rec.faults


class _KillsItsEngineInItsSecondMove(StockfishStrategy):
    """On its second move, once the engine is handed to the move (under the engine's lock), kills it
    and waits until python-chess has seen it die, before the search is sent: so the engine dies with
    a move in flight whatever the load. (Killing it from the referee's `moved` event raced the match:
    events go out while the match goes on, so the kill landed at a load-dependent point.)"""

    def __init__(self) -> None:
        super().__init__(StockfishOptions(movetime_ms=20, skill_level=1))
        self.killed: list[int] = []
        self._handed = 0

    async def _ensure_engine(self, slot: _Engine) -> chess.engine.UciProtocol:
        engine = await super()._ensure_engine(slot)
        self._handed += 1
        if self._handed == 2:
            pid = self.engine_pid
            assert pid is not None
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)
            await asyncio.wait_for(asyncio.shield(engine.returncode), 60)
        return engine


async def test_engine_killed_mid_game_is_an_error_then_restarts(nc) -> None:
    sf, first = uid("sf"), uid("first")
    strategy = _KillsItsEngineInItsSecondMove()
    # 60 s deadlines: under load an engine's start-up can take seconds, and must not be the fault.
    async with serving(nc, strategy, sf), serving(nc, _first(), first):
        rec = await play(nc, spec("chess", [sf, first], deadline_ms=60_000))
        assert strategy.killed and sum(m.agent == sf for m in rec.moves) == 1
        assert [f.reason for f in rec.faults] == ["error"] and rec.faults[0].agent == sf
        assert "stockfish engine failed" in rec.faults[0].detail
        assert rec.outcome == "forfeit" and rec.forfeited == [0]
        # The next match: a new engine, full game, no fault.
        rec2 = await play(nc, spec("chess", [first, sf], max_turns=120, deadline_ms=60_000))
    await strategy.close()
    assert strategy.restarts == 1 and strategy.engine_pid is None
    assert not rec2.faults and sum(m.agent == sf for m in rec2.moves) >= 2
    assert rec2.outcome == "decisive" and rec2.returns == [-1.0, 1.0]  # it mates `first`


async def test_default_limit_is_fixed_work(nc) -> None:
    """No limit given: 100,000 nodes a move, so two fresh engines play the same game with the same
    node counts however loaded the machine is (a 100 ms limit searched a load-dependent amount)."""
    runs: list[list[tuple[str, int | None]]] = []
    for _ in range(2):
        white, black = uid("sfw"), uid("sfb")
        a, b = StockfishStrategy(StockfishOptions()), StockfishStrategy(StockfishOptions())
        async with serving(nc, a, white), serving(nc, b, black):
            rec = await play(nc, spec("chess", [black, white], max_turns=6, deadline_ms=120_000))
        await a.close()
        await b.close()
        assert not rec.faults and len(rec.moves) == 6
        runs.append([(m.text, m.stats.nodes if m.stats else None) for m in rec.moves])
    assert runs[0] == runs[1]
    assert all(nodes is not None and 50_000 < nodes <= 101_000 for _, nodes in runs[0])


def test_limits_combine_and_movetime_is_opt_in() -> None:
    assert _sf()._limit(DecisionLimit(10.0)) == chess.engine.Limit(time=0.02)
    both = StockfishStrategy(StockfishOptions(nodes=5000, depth=7))._limit(DecisionLimit(10.0))
    assert (both.nodes, both.depth, both.time) == (5000, 7, 5.0)
    default = StockfishStrategy(StockfishOptions())._limit(DecisionLimit(10.0))
    assert (default.nodes, default.depth, default.time) == (100_000, None, 5.0)


def test_board_is_kept_per_match_and_extended_not_rebuilt() -> None:
    """Issue 32: the board is not rebuilt from the whole history each turn (O(n^2) per game)."""
    from games.chess.uci import board_from_history, move_to_action

    sf = _sf()
    board = chess.Board()
    actions: list[int] = []
    for uci in ("e2e4", "e7e5", "g1f3", "b8c6"):
        actions.append(move_to_action(board, chess.Move.from_uci(uci)))
        board.push_uci(uci)
    first = sf._board("m1", None, actions[:2])
    later = sf._board("m1", None, actions)
    assert later is first  # extended in place
    assert later.move_stack == board_from_history(None, actions).move_stack
    # A history that does not extend the kept one (another start) is rebuilt, not extended.
    other = sf._board("m1", None, actions[:1])
    assert other is not first and other.move_stack == board.move_stack[:1]
    assert sf._board("m2", None, []).fen() == chess.STARTING_FEN


class _Meeting(StockfishStrategy):
    """With `meet` set, each match's first move waits until the other match's first move has come
    too, so the two matches are certainly in flight at once: on a loaded machine one of them could
    otherwise be played out before the other one's first turn reached the agent."""

    def __init__(self, options: StockfishOptions) -> None:
        super().__init__(options)
        self.meet = False
        self._barrier = asyncio.Barrier(2)
        self._met: set[str] = set()

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        if self.meet and turn.match_id not in self._met:
            self._met.add(turn.match_id)
            await self._barrier.wait()
        return await super().decide(turn, ctx)


async def test_concurrent_matches_play_as_they_would_alone(nc) -> None:
    """Issue 32: each match in flight has its own engine, bound until the match ends, so a match's
    moves do not depend on what else the agent plays. One engine shared by two interleaved matches
    cleared its hash (`ucinewgame`) before every move and played other games than at concurrency 1."""
    white, black = uid("sfw"), uid("sfb")
    opts = {"nodes": 3000}
    a, b = _Meeting(StockfishOptions(**opts)), _Meeting(StockfishOptions(**opts))

    def match() -> MatchSpec:
        return spec("chess", [black, white], max_turns=60, deadline_ms=120_000)

    try:
        async with serving(nc, a, white), serving(nc, b, black):
            alone = [await play(nc, match()) for _ in range(2)]
            a.meet = b.meet = True
            together = await asyncio.gather(play(nc, match()), play(nc, match()))
            moves = [[m.text for m in rec.moves] for rec in [*alone, *together]]
            assert all(not rec.faults for rec in [*alone, *together])
            assert moves[0] == moves[1]  # a fresh engine per match: the same game each time
            assert moves[2] == moves[0] and moves[3] == moves[0]
            # Two matches were in flight at once: two engines for each agent.
            assert len(a.engine_pids) == 2 and len(b.engine_pids) == 2
    finally:
        await a.close()
        await b.close()


async def test_elo_option_limits_strength_in_the_engine() -> None:
    """`elo` turns on UCI_LimitStrength with that UCI_Elo in the engine itself (the levels
    `spielbus calibrate chess` holds at their Elo); without it the engine plays unlimited."""
    for elo, limited in ((1500, True), (None, False)):
        sf = StockfishStrategy(StockfishOptions(nodes=500, elo=elo))
        slot = _Engine()
        engine = await sf._ensure_engine(slot)
        try:
            assert engine.config.get("UCI_LimitStrength", False) is limited
            if limited:
                assert engine.config["UCI_Elo"] == 1500
        finally:
            await sf._drop_engine(slot)
