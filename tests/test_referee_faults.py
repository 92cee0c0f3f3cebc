"""Every way an agent's answer can be wrong becomes a recorded fault; the referee keeps running."""

from __future__ import annotations

import asyncio
import json

import nats.errors
import pytest
from nats.aio.msg import Msg

from agents.base import StrategyOptions
from agents.random_agent import FirstLegalStrategy, RandomStrategy
from bus.protocol import FaultPolicy, GameSpec, LegalAction, Move, Turn
from bus.subjects import Subjects
from tests.helpers import play, raw_responder, serving, spec, uid


def _move(turn: Turn, **kw: object) -> bytes:
    return Move(match_id=turn.match_id, turn=turn.turn, **kw).model_dump_json().encode()


async def _first(turn: Turn, msg: Msg) -> bytes:
    return _move(turn, action=turn.legal_actions[0].id)


BAD_REPLIES = {
    "illegal id": (lambda t: _move(t, action=9999), "illegal"),
    "unknown text": (lambda t: _move(t, action_text="the moon"), "illegal"),
    "no action at all": (lambda t: _move(t), "illegal"),
    "not json": (lambda t: b"{this is not json", "malformed"),
    "wrong shape": (lambda t: json.dumps({"v": 1, "type": "move", "action": "seven"}).encode(), "malformed"),
    "json list": (lambda t: b"[1, 2, 3]", "malformed"),
    "wrong match": (
        lambda t: (
            Move(match_id="other", turn=t.turn, action=t.legal_actions[0].id).model_dump_json().encode()
        ),
        "malformed",
    ),
    "stale turn": (
        lambda t: (
            Move(match_id=t.match_id, turn=t.turn - 1, action=t.legal_actions[0].id)
            .model_dump_json()
            .encode()
        ),
        "malformed",
    ),
    "one megabyte": (lambda t: b'{"pad": "' + b"x" * 1_000_000 + b'"}', "malformed"),
}


@pytest.mark.parametrize("case", sorted(BAD_REPLIES))
async def test_bad_reply_is_recorded_and_forfeits(nc, case: str) -> None:
    make, reason = BAD_REPLIES[case]
    bad, good = uid("bad"), uid("good")

    async def reply(turn: Turn, msg: Msg) -> bytes:
        return make(turn)

    async with raw_responder(nc, bad, reply), raw_responder(nc, good, _first):
        rec = await play(nc, spec("tic_tac_toe", [bad, good]))
    assert rec.outcome == "forfeit"
    assert rec.forfeited == [0]
    assert [f.reason for f in rec.faults] == [reason]
    assert rec.faults[0].agent == bad
    assert rec.returns == [-1.0, 1.0]
    assert rec.ranks == [2, 1]


async def test_text_answer_matches_a_legal_action(nc) -> None:
    a, b = uid("txt"), uid("first")

    async def by_text(turn: Turn, msg: Msg) -> bytes:
        return _move(turn, action_text=turn.legal_actions[-1].text.upper())

    async with raw_responder(nc, a, by_text), raw_responder(nc, b, _first):
        rec = await play(nc, spec("tic_tac_toe", [a, b]))
    assert rec.faults == []
    assert rec.outcome in ("decisive", "draw")
    first = rec.moves[0]
    assert first.agent == a and first.action == 8  # the last legal cell, named by its text


async def test_silent_agent_times_out_and_other_matches_go_on(nc) -> None:
    silent, good, other = uid("silent"), uid("good"), uid("other")

    async def never(turn: Turn, msg: Msg) -> None:
        return None

    async with (
        raw_responder(nc, silent, never),
        raw_responder(nc, good, _first),
        serving(nc, RandomStrategy(StrategyOptions(seed=3)), other),
    ):
        timed, normal = await asyncio.gather(
            play(nc, spec("tic_tac_toe", [good, silent], deadline_ms=300)),
            play(nc, spec("tic_tac_toe", [good, other], deadline_ms=3000)),
        )
    assert timed.outcome == "forfeit" and timed.forfeited == [1]
    assert [f.reason for f in timed.faults] == ["timeout"]
    assert normal.faults == [] and normal.outcome in ("decisive", "draw")


async def test_no_responder_is_retried_until_the_deadline(nc) -> None:
    good = uid("good")
    async with raw_responder(nc, good, _first):
        rec = await play(nc, spec("tic_tac_toe", [uid("nobody"), good], deadline_ms=1500))
    assert [f.reason for f in rec.faults] == ["no_responder"]
    assert rec.outcome == "forfeit" and rec.forfeited == [0]
    asked = int(rec.faults[0].detail.split("asked ")[1].split()[0])
    assert asked > 1, rec.faults[0].detail


async def test_an_agent_joining_within_the_deadline_is_not_faulted(nc, monkeypatch) -> None:
    """An agent restarting (or reconnecting after a NATS restart) is not absent: the referee asks again
    with backoff within the turn's deadline."""
    late, good = uid("late"), uid("good")
    found_nobody = asyncio.Event()
    request = nc.request

    async def noting_refusals(subject: str, *args, **kw):
        try:
            return await request(subject, *args, **kw)
        except nats.errors.NoRespondersError:
            if subject == Subjects().turn(late):
                found_nobody.set()
            raise

    monkeypatch.setattr(nc, "request", noting_refusals)
    async with raw_responder(nc, good, _first):
        task = asyncio.create_task(play(nc, spec("tic_tac_toe", [late, good], deadline_ms=20_000)))
        await asyncio.wait_for(found_nobody.wait(), 60)  # the first request found nobody
        async with raw_responder(nc, late, _first):
            rec = await task
    assert rec.faults == [] and rec.outcome in ("decisive", "draw")


async def test_strategy_exception_is_an_error_fault(nc) -> None:
    class Broken(FirstLegalStrategy):
        async def decide(self, turn, ctx):
            raise RuntimeError("boom")

    broken, good = uid("broken"), uid("good")
    async with serving(nc, Broken(StrategyOptions()), broken), raw_responder(nc, good, _first):
        rec = await play(nc, spec("tic_tac_toe", [good, broken]))
    assert [f.reason for f in rec.faults] == ["error"]
    assert "boom" in rec.faults[0].detail


async def test_retry_policy_feeds_the_reason_back(nc) -> None:
    flaky, good = uid("flaky"), uid("good")

    async def wrong_then_right(turn: Turn, msg: Msg) -> bytes:
        if turn.retry is None:
            return _move(turn, action=4242)
        return _move(turn, action=turn.legal_actions[0].id)

    async with raw_responder(nc, flaky, wrong_then_right) as seen, raw_responder(nc, good, _first):
        rec = await play(nc, spec("tic_tac_toe", [flaky, good], policy=FaultPolicy(kind="retry", retries=1)))
    assert rec.outcome in ("decisive", "draw")
    retried = [t for t in seen if t.retry]
    assert retried and all("illegal" in (t.retry or "") and "4242" in (t.retry or "") for t in retried)
    # One fault per move the flaky agent made, each followed by an accepted retry.
    assert len(rec.faults) == sum(1 for m in rec.moves if m.agent == flaky)
    assert all(f.reason == "illegal" for f in rec.faults)


async def test_retry_policy_forfeits_when_retries_run_out(nc) -> None:
    stubborn, good = uid("stubborn"), uid("good")

    async def always_wrong(turn: Turn, msg: Msg) -> bytes:
        return _move(turn, action=-5)

    async with raw_responder(nc, stubborn, always_wrong) as seen, raw_responder(nc, good, _first):
        rec = await play(
            nc, spec("tic_tac_toe", [stubborn, good], policy=FaultPolicy(kind="retry", retries=2))
        )
    assert rec.outcome == "forfeit" and rec.forfeited == [0]
    assert len(rec.faults) == 3 and len(seen) == 3


async def test_random_policy_plays_for_the_seat(nc) -> None:
    wrong, good = uid("wrong"), uid("good")

    async def always_wrong(turn: Turn, msg: Msg) -> bytes:
        return b"garbage"

    async with raw_responder(nc, wrong, always_wrong), raw_responder(nc, good, _first):
        rec = await play(nc, spec("connect_four", [wrong, good], policy=FaultPolicy(kind="random")))
    assert rec.outcome in ("decisive", "draw")
    forced = [m for m in rec.moves if m.forced]
    assert forced and all(m.agent == wrong for m in forced)
    assert len(rec.faults) == len(forced)
    assert {f.reason for f in rec.faults} == {"malformed"}


async def test_dead_replica_times_out_and_the_other_replica_takes_over(nc) -> None:
    """One replica takes a turn and dies (never answers); the retry lands on the live replica."""
    name, good = uid("replicated"), uid("good")
    dead = asyncio.Event()

    async def die(turn: Turn, msg: Msg) -> None:
        dead.set()
        return None

    rec = None
    async with raw_responder(nc, good, _first):
        # The dying replica subscribes first and alone, so it takes the first turn.
        async with raw_responder(nc, name, die, queue=name):
            task = asyncio.create_task(
                play(
                    nc,
                    spec(
                        "tic_tac_toe",
                        [name, good],
                        deadline_ms=500,
                        policy=FaultPolicy(kind="retry", retries=1),
                    ),
                )
            )
            await asyncio.wait_for(dead.wait(), 30)
        # That replica is gone now; a healthy one joins the same queue group.
        async with serving(nc, FirstLegalStrategy(StrategyOptions()), name):
            rec = await task
    assert rec is not None
    assert rec.faults and rec.faults[0].reason == "timeout"
    assert rec.outcome in ("decisive", "draw")
    assert any(m.agent == name for m in rec.moves)


async def test_a_stopping_agent_answers_instead_of_going_silent(nc) -> None:
    """SIGTERM drain: the turn in flight is finished; a turn arriving meanwhile is refused at once
    (or finds nobody), never left to run out the referee's deadline."""
    from agents.runtime import AgentService
    from tests.helpers import spec as make_spec

    release, started = asyncio.Event(), asyncio.Event()

    class Slow(FirstLegalStrategy):
        async def decide(self, turn, ctx):
            started.set()
            await release.wait()
            return await super().decide(turn, ctx)

    name = uid("draining")
    svc = AgentService(nc, Slow(StrategyOptions()), name=name)
    await svc.start()
    match = make_spec("tic_tac_toe", [name, "other"])
    from games.loader import load_game
    from referee.turns import TurnFrame, build_turn

    state = load_game("tic_tac_toe").new_initial_state()

    def turn(n: int) -> bytes:
        t = build_turn(TurnFrame(match.match_id, match.game, match.seats, 60_000), state, 0, n, None)
        return t.model_dump_json().encode()

    subject = Subjects().turn(name)
    first = asyncio.create_task(nc.request(subject, turn(1), timeout=60))
    await started.wait()
    stopping = asyncio.create_task(svc.stop())
    await asyncio.sleep(0)
    try:
        reply = await nc.request(subject, turn(2), timeout=60)
        assert reply.headers and reply.headers.get("Nats-Service-Error-Code") == "503"
    except nats.errors.NoRespondersError:
        pass  # already unsubscribed: the referee records no_responder at once
    release.set()
    answered = await first
    assert Move.model_validate_json(answered.data).action == 0
    await stopping


def test_an_agents_own_504_is_a_timeout_and_other_service_errors_are_errors() -> None:
    from bus.replies import check_reply

    turn = Turn(
        match_id="m",
        game=GameSpec(name="tic_tac_toe"),
        seat=0,
        seats=["x", "y"],
        turn=1,
        deadline_ms=100,
        observation="...",
        legal_actions=[LegalAction(id=4, text="x(1,1)")],
    )
    said = {"Nats-Service-Error": "agent a: the strategy did not decide", "Nats-Service-Error-Code": "504"}
    assert check_reply(turn, b"", said)[1] == "timeout"
    busy = {"Nats-Service-Error": "agent a: backlog full", "Nats-Service-Error-Code": "503"}
    assert check_reply(turn, b"", busy)[1] == "error"
