"""Deadlines carried into agents (issue 10, item 2) and replicas that play alike (item 3).

Real nats-server; the turns are sent the way the referee sends them (`nc.request` with the
deadline as timeout, `sent_at` set). Assertions are on what happened to each turn (a move, an
immediate refusal, or a timeout) and on how many turns the strategy computed, never on times.
"""

from __future__ import annotations

import asyncio
import time

import nats.errors

from agents.base import Decision, MatchContext, Strategy, StrategyOptions
from bus.protocol import GameSpec, LegalAction, Move, Turn
from bus.subjects import Subjects
from games.loader import load_game
from games.rules import rules_text
from tests.helpers import serving, uid


class SlowStrategy(Strategy):
    """Takes ~0.1 s per turn and records what it was given."""

    kind = "slow"
    wants_rules = True

    def __init__(self) -> None:
        super().__init__(StrategyOptions())
        self.started = 0
        self.deadlines: list[float | None] = []
        self.rules: list[str | None] = []

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        self.started += 1
        self.deadlines.append(getattr(ctx, "deadline", None))
        self.rules.append(turn.rules)
        await asyncio.sleep(0.1)
        return Decision(action=turn.legal_actions[0].id)


def _turn(match_id: str, n: int, deadline_ms: int, rules: str | None = None) -> Turn:
    return Turn(
        match_id=match_id,
        game=GameSpec(name="tic_tac_toe"),
        seat=0,
        seats=["x", "y"],
        turn=n,
        deadline_ms=deadline_ms,
        observation="...",
        legal_actions=[LegalAction(id=4, text="x(1,1)")],
        rules=rules,
        sent_at=time.time(),
    )


async def _ask(nc, agent: str, turn: Turn) -> str:
    """One turn as the referee asks it: 'move', 'refused' (a service error) or 'timeout'."""
    try:
        msg = await nc.request(
            Subjects().turn(agent),
            turn.model_dump_json(exclude_none=True).encode(),
            timeout=turn.deadline_ms / 1000,
        )
    except (nats.errors.TimeoutError, TimeoutError):
        return "timeout"
    if msg.headers and "Nats-Service-Error-Code" in msg.headers:
        return "refused"
    Move.model_validate_json(msg.data)
    return "move"


async def test_a_backlog_past_its_deadline_is_refused_not_computed(nc) -> None:
    """16 turns at once, 1 s each, one at a time at ~0.1 s: the agent answers those it can in time
    and refuses the rest the moment their time runs out, instead of computing all 16 late."""
    name = uid("dl")
    strategy = SlowStrategy()
    async with serving(nc, strategy, name, max_concurrency=1):
        results = await asyncio.gather(*(_ask(nc, name, _turn(uid("m"), 1, 1000)) for _ in range(16)))
    moves, refused, timeouts = (results.count(k) for k in ("move", "refused", "timeout"))
    assert moves + refused + timeouts == 16
    assert moves >= 1 and refused >= 1
    # Before: every queued turn was computed and answered late, so ~7 of 16 timed out.
    assert timeouts <= 1
    # Work is spent only on turns that could still count (at most the one in hand at the deadline).
    assert strategy.started <= moves + 1
    # Every strategy call had its deadline, from the turn's arrival or its send time.
    assert all(d is not None for d in strategy.deadlines)


async def test_turns_beyond_the_backlog_are_refused_at_once(nc) -> None:
    name = uid("bl")
    strategy = SlowStrategy()
    async with serving(nc, strategy, name, max_concurrency=1, max_backlog=2) as svc:
        results = await asyncio.gather(*(_ask(nc, name, _turn(uid("m"), 1, 5000)) for _ in range(8)))
    # One in hand, two waiting, five refused on arrival; the three kept ones are all answered.
    assert results.count("move") == 3 and results.count("refused") == 5
    assert strategy.started == 3 and svc.turns_refused == 5


async def test_an_expired_turn_is_refused_without_computing(nc) -> None:
    """A turn whose send time says its clock has already run out is answered with an error at once."""
    name = uid("ex")
    strategy = SlowStrategy()
    async with serving(nc, strategy, name):
        turn = _turn(uid("m"), 1, 500).model_copy(update={"sent_at": time.time() - 5})
        msg = await nc.request(Subjects().turn(name), turn.model_dump_json().encode(), timeout=2)
    assert msg.headers and msg.headers.get("Nats-Service-Error-Code") == "504"
    assert strategy.started == 0


async def test_replicas_play_with_the_rules_on_every_turn(nc) -> None:
    """Item 3: the referee sends the rules on a seat's first turn, to one replica; every replica's
    strategy still sees them (derived locally from the game spec)."""
    name = uid("rep")
    first, second = SlowStrategy(), SlowStrategy()
    expected = rules_text(load_game("tic_tac_toe"))
    match = uid("m")
    async with serving(nc, first, name), serving(nc, second, name):
        assert await _ask(nc, name, _turn(match, 1, 5000, rules=expected)) == "move"
        for n in range(2, 12):
            assert await _ask(nc, name, _turn(match, n, 5000)) == "move"
    assert first.started and second.started  # the queue group spread the turns over both
    assert first.rules + second.rules and all(r == expected for r in first.rules + second.rules)


# Modules that may read a turn's `deadline_ms`: the runtime (it computes the deadline), the base
# (it builds each decision's `DecisionLimit`), the command line (flags), and the human seat's page,
# which counts down the turn's clock for the player.
READS_THE_CLOCK = {"agents/runtime.py", "agents/base.py", "agents/cli.py", "agents/human/seat.py"}


def test_no_strategy_reads_the_turns_deadline_itself() -> None:
    """One limit per decision, handed by the runtime (`ctx.limit(turn)`): each strategy takes its
    share of the clock from it, so the time rule lives in one place."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    readers = {
        str(p.relative_to(root))
        for p in (root / "agents").rglob("*.py")
        if any(
            isinstance(n, ast.Attribute) and n.attr == "deadline_ms"
            for n in ast.walk(ast.parse(p.read_text()))
        )
    }
    assert readers <= READS_THE_CLOCK, sorted(readers - READS_THE_CLOCK)


def test_a_decision_limit_is_the_clock_and_the_runtimes_deadline() -> None:
    turn = Turn(
        match_id="m",
        game=GameSpec(name="tic_tac_toe"),
        seat=0,
        seats=["a", "b"],
        turn=1,
        deadline_ms=2000,
        observation="",
        legal_actions=[LegalAction(id=0, text="x")],
    )
    free = MatchContext("m").limit(turn)
    assert (free.clock_s, free.end, free.share(0.8), free.remaining()) == (2.0, None, 1.6, 2.0)
    end = time.monotonic() + 0.5
    limit = MatchContext("m", deadline=end).limit(turn)
    assert limit.share(0.5) == 1.0 and 0 < limit.remaining() <= 0.5
