"""Provider faults are not the model's play (issue 38, points 3 and 6, the referee's half): a decision
the agent's LLM provider failed is answered with `failure`, recorded as fault `provider`, and
`[policy] provider` voids and replays the match (same seed and secret), forfeits, or plays at random;
standings and ratings leave touched matches out and count them apart; a move's LLM calls are kept in
the record, and spectators see a seat's thinking only under the rule for its private information.

Against a real nats-server, real agent services and the real referee worker. The end-to-end outage
run with real processes and an HTTP stand-in is tests/test_provider_outage.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from nats.aio.msg import Msg
from pydantic import ValidationError

from agents.base import Decision, MatchContext, ProviderFailure, Strategy, StrategyOptions, decision_rng
from agents.random_agent import RandomStrategy
from bus.protocol import (
    MAX_CALL_REASONING,
    Budget,
    BudgetLimits,
    FaultPolicy,
    FaultRecord,
    LLMCall,
    MatchEvent,
    MatchRecord,
    MatchSpec,
    Move,
    MoveRecord,
    Turn,
    Usage,
    VoidedAttempt,
    trim_record,
)
from bus.replies import MAX_REPLY_BYTES
from bus.subjects import Subjects
from observability.web.app import start_web
from observability.web.feed import MatchFeed
from referee.budget import BudgetMeter
from referee.config import RatingsConfig
from referee.faults import decide
from referee.ratings import ratings, standings
from referee.sprt import game_score
from referee.worker import RefereeWorker
from spielbus import replay
from tests.helpers import ended_event, serving, spec, uid


def _call(i: int, outcome: str = "answered", reasoning: str = "I think.") -> dict[str, Any]:
    return {
        "id": f"call-{i}",
        "outcome": outcome,
        "status": 200,
        "finish_reason": "stop",
        "attempts": 1,
        "waited_s": 0.0,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "reasoning_tokens": 3,
        "tokens_estimated": False,
        "cost_usd": 0.001,
        "reasoning": reasoning,
        "answer": "x",
    }


class Flaky(Strategy):
    """Seeded random moves with thinking; raises `ProviderFailure` while `down` holds (a provider
    outage, as the LLM layer reports it)."""

    kind = "flaky_test"

    def __init__(self, options: StrategyOptions, down: int = 0, always: bool = False) -> None:
        super().__init__(options)
        self.down = down  # decisions to fail before the provider is back
        self.always = always
        self.failed = 0

    async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
        if self.always or self.failed < self.down:
            self.failed += 1
            raise ProviderFailure("503 Service Unavailable after 3 attempts", [f"c{self.failed}"])
        action = decision_rng(self.options.seed, turn).choice(turn.legal_actions).id
        return Decision(
            action=action,
            usage=Usage(llm_calls=1, cost_usd=0.001),
            calls=[_call(turn.turn, reasoning=f"my secret view {turn.observation}")],
        )


# -- the wire -------------------------------------------------------------------------------------


def test_new_fields_absent_keep_the_old_json() -> None:
    assert Usage(llm_calls=1, prompt_tokens=2).model_dump_json(exclude_none=True) == (
        '{"llm_calls":1,"prompt_tokens":2,"completion_tokens":0,"cache_hits":0}'
    )
    move = Move(match_id="m", turn=1, action=3)
    assert json.loads(move.model_dump_json(exclude_none=True)) == {
        "v": 1,
        "type": "move",
        "match_id": "m",
        "turn": 1,
        "action": 3,
        "usage": {"llm_calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "cache_hits": 0},
    }
    rec = MoveRecord(turn=1, player=0, action=3, text="x")
    assert "calls" not in rec.model_dump(exclude_none=True)


def test_calls_and_failure_are_strict_and_bounded() -> None:
    ok = Move.model_validate_json(
        json.dumps(
            {
                "v": 1,
                "type": "move",
                "match_id": "m",
                "turn": 1,
                "failure": {"kind": "provider", "cause": "503", "calls": ["a"]},
                "calls": [{"id": "a", "outcome": "provider", "status": 503}],
            }
        )
    )
    assert ok.failure is not None and ok.failure.cause == "503" and ok.calls is not None
    bad_calls: list[dict[str, Any]] = [
        {"id": "a", "outcome": "fine"},  # not a class
        {"id": "a", "outcome": "answered", "reasoning": "x" * (MAX_CALL_REASONING + 1)},
        {"id": "a", "outcome": "answered", "prompt_tokens": -1},
        {"id": "a", "outcome": "answered", "waited_s": "1"},  # no coercion
    ]
    for call in bad_calls:
        with pytest.raises(ValidationError):
            Move.model_validate_json(
                json.dumps({"v": 1, "type": "move", "match_id": "m", "turn": 1, "calls": [call]})
            )
    with pytest.raises(ValidationError):
        Move.model_validate_json(
            '{"v":1,"type":"move","match_id":"m","turn":1,"usage":{"cost_usd":Infinity}}'
        )
    with pytest.raises(ValidationError):
        Move.model_validate_json(
            json.dumps(
                {"v": 1, "type": "move", "match_id": "m", "turn": 1, "calls": [_call(i) for i in range(33)]}
            )
        )
    with pytest.raises(ValidationError):
        FaultPolicy.model_validate({"provider": "ignore"})


def test_summaries_are_cut_to_the_bounds() -> None:
    call = LLMCall.from_summary({**_call(1), "reasoning": "r" * 10_000, "answer": "a" * 5000})
    assert call.reasoning == "r" * MAX_CALL_REASONING and call.reasoning_chars == 10_000
    assert call.answer is not None and len(call.answer) == 1000


def test_provider_faults_follow_the_provider_rule_not_the_kind() -> None:
    assert decide("provider", 1, FaultPolicy()) == "void"
    assert decide("provider", 1, FaultPolicy(kind="retry", retries=5)) == "void"
    assert decide("provider", 1, FaultPolicy(kind="random", provider="forfeit")) == "forfeit"
    assert decide("provider", 1, FaultPolicy(provider="random")) == "random"


def test_budgets_take_reasoning_tokens_and_dollars() -> None:
    budget = Budget(per_move=BudgetLimits(reasoning_tokens=100), per_match=BudgetLimits(dollars=0.5))
    meter = BudgetMeter({"a": budget})
    move = Move(match_id="m", turn=1, action=0, usage=Usage(reasoning_tokens=150))
    assert meter.charge("a", move)[2] == "per-move budget exceeded: reasoning_tokens 150 > 100"
    meter = BudgetMeter({"a": budget})
    cheap = Move(match_id="m", turn=1, action=0, usage=Usage(cost_usd=0.3))
    assert meter.charge("a", cheap)[2] is None
    assert meter.charge("a", cheap)[2] == "per-match budget exceeded: dollars 0.6 > 0.5"


def test_a_record_too_large_loses_the_thinking_first() -> None:
    calls = [LLMCall.from_summary(_call(i, reasoning="t" * 4000)) for i in range(10)]
    moves = [MoveRecord(turn=i, player=0, action=0, text="a", calls=calls, note="kept") for i in range(10)]
    rec = MatchRecord(
        match_id="m", tournament="t", game={"name": "tic_tac_toe"}, seats=["a"], seed=1, moves=moves
    )
    out = trim_record(rec, 60_000)
    assert out.trimmed is not None and "thinking" in out.trimmed
    assert out.moves[0].note == "kept" and out.moves[0].calls is not None
    assert out.moves[0].calls[0].reasoning is None and out.moves[0].calls[0].prompt_tokens == 10


# -- the agent runtime ----------------------------------------------------------------------------


async def test_runtime_answers_a_provider_failure_and_sends_the_calls(nc) -> None:
    name = uid("flaky")
    async with serving(nc, Flaky(StrategyOptions(seed=1), down=1), name):
        turn = Turn(
            match_id="m1",
            game={"name": "tic_tac_toe"},
            seat=0,
            seats=[name, "b"],
            turn=1,
            deadline_ms=3000,
            observation="board",
            legal_actions=[{"id": 0, "text": "x(0,0)"}],
        )
        subject = Subjects().turn(name)
        first: Msg = await nc.request(subject, turn.model_dump_json().encode(), timeout=5)
        failed = Move.model_validate_json(first.data)
        second = Move.model_validate_json(
            (
                await nc.request(
                    subject, turn.model_copy(update={"turn": 2}).model_dump_json().encode(), timeout=5
                )
            ).data
        )
    assert failed.action is None and failed.failure is not None
    assert failed.failure.cause == "503 Service Unavailable after 3 attempts" and failed.failure.calls == [
        "c1"
    ]
    assert second.action == 0 and second.calls is not None
    assert second.calls[0].id == "call-2" and second.calls[0].reasoning == "my secret view board"


async def test_runtime_drops_thinking_to_fit_the_reply_limit(nc) -> None:
    class Verbose(Strategy):
        kind = "verbose_test"

        async def decide(self, turn: Turn, ctx: MatchContext) -> Decision:
            return Decision(action=0, calls=[_call(i, reasoning="z" * 4000) for i in range(32)])

    name = uid("verbose")
    async with serving(nc, Verbose(StrategyOptions()), name):
        turn = Turn(
            match_id="m1",
            game={"name": "tic_tac_toe"},
            seat=0,
            seats=[name, "b"],
            turn=1,
            deadline_ms=3000,
            observation="board",
            legal_actions=[{"id": 0, "text": "x(0,0)"}],
        )
        msg = await nc.request(Subjects().turn(name), turn.model_dump_json().encode(), timeout=5)
    assert len(msg.data) <= MAX_REPLY_BYTES
    move = Move.model_validate_json(msg.data)
    assert move.action == 0 and move.calls is not None and len(move.calls) == 32
    assert any(c.reasoning is None for c in move.calls) and any(c.reasoning for c in move.calls)


# -- the referee ----------------------------------------------------------------------------------


def _policy(provider: str, **kw: Any) -> FaultPolicy:
    return FaultPolicy(provider=provider, provider_wait_s=0.05, **kw)


async def _play(
    nc, game: str, down: int, policy: FaultPolicy, *, always: bool = False, seed: int = 4, names: str = ""
):
    # Seeded agents decide from what the seat knows, its seat names included: the same names, the same game.
    a, b = (f"llm-{names}", f"rnd-{names}") if names else (uid("llm"), uid("rnd"))
    events: list[MatchEvent] = []
    worker = RefereeWorker(nc, on_event=events.append)
    flaky = Flaky(StrategyOptions(seed=7), down=down, always=always)
    async with serving(nc, flaky, a), serving(nc, RandomStrategy(StrategyOptions(seed=8)), b):
        rec = await worker.play(spec(game, [a, b], seed=seed, policy=policy))
    return rec, events, a


def _steps(rec: MatchRecord) -> list[tuple[int, int, str]]:
    return [(m.player, m.action, m.text) for m in rec.moves]


async def test_void_replays_the_match_with_the_same_seed_and_secret(nc) -> None:
    names = uid("v")
    clean, _, _ = await _play(nc, "leduc_poker", 0, _policy("void"), names=names)
    assert clean.voided is None
    # The provider fails the seat's first decision, and again in the first replay.
    voided, events, agent = await _play(nc, "leduc_poker", 2, _policy("void"), names=names)
    assert voided.outcome == clean.outcome and voided.returns == clean.returns
    assert _steps(voided) == _steps(clean)  # chance and moves alike: the same match
    assert voided.faults == [] and voided.secret == clean.secret
    assert voided.voided is not None and len(voided.voided) == 2
    assert all(v.agent == agent and v.cause.startswith("503") for v in voided.voided)
    provider_faults = [e.fault for e in events if e.type == "forfeit" and e.fault is not None]
    assert [f.reason for f in provider_faults] == ["provider", "provider"]
    table = {s.agent: s for s in standings([voided])}
    assert table[agent].voided == 2 and table[agent].provider_faults == 2 and table[agent].played == 1


async def test_void_gives_up_after_its_retries_and_reports_the_match_unplayed(nc) -> None:
    rec, _, _ = await _play(nc, "tic_tac_toe", 0, _policy("void", provider_retries=2), always=True)
    assert rec.outcome == "void" and rec.voided is not None and len(rec.voided) == 3
    assert rec.moves == [] and rec.secret is not None
    assert ratings([rec], RatingsConfig())[0].elo == 1500.0


async def test_forfeit_and_random_policies_record_the_provider_fault(nc) -> None:
    names = uid("p")
    lost, _, agent = await _play(nc, "tic_tac_toe", 1, _policy("forfeit"), names=names)
    assert lost.outcome == "forfeit" and [f.reason for f in lost.faults] == ["provider"]
    assert lost.faults[0].detail.startswith("503") and lost.faults[0].calls is not None
    assert lost.faults[0].calls[0].id == "c1" and lost.faults[0].calls[0].outcome == "provider"
    randomised, _, _ = await _play(nc, "tic_tac_toe", 1, _policy("random"), names=names)
    assert [f.reason for f in randomised.faults] == ["provider"]
    assert randomised.outcome in ("decisive", "draw") and any(m.forced for m in randomised.moves)
    for rec in (lost, randomised):
        row = {s.agent: s for s in standings([rec])}[agent]
        assert row.played == 0 and row.excluded == 1 and row.provider_faults == 1
        assert row.faults_per_100_moves == 0.0  # the provider's fault is not the agent's compliance
        assert {r.elo for r in ratings([rec], RatingsConfig())} == {1500.0}
        told = {s.agent: s for s in standings([rec], count_provider_faults=True)}[agent]
        assert told.played == 1
    assert {r.elo for r in ratings([lost], RatingsConfig(count_provider_faults=True))} != {1500.0}


def test_standings_count_call_classes_and_bad_output_apart() -> None:
    calls = [LLMCall(id="1", outcome="truncated"), LLMCall(id="2", outcome="filtered")]
    rec = MatchRecord(
        match_id="m",
        tournament="t",
        game={"name": "tic_tac_toe"},
        seats=["a", "b"],
        seed=1,
        moves=[MoveRecord(turn=1, player=0, action=0, text="x", agent="a", calls=calls)],
        faults=[FaultRecord(turn=2, seat=1, agent="b", reason="illegal")],
        outcome="forfeit",
        forfeited=[1],
        returns=[1.0, -1.0],
        ranks=[1, 2],
        voided=[VoidedAttempt(agent="a", turn=3, cause="429")],
    )
    table = {s.agent: s for s in standings([rec])}
    assert (table["a"].truncated, table["a"].filtered, table["a"].voided) == (1, 1, 1)
    assert table["b"].bad_output == 1 and table["a"].wins == 1  # a clean replay counts


def test_standings_sum_each_agents_cost_and_leave_unpriced_agents_unknown() -> None:
    moves = [
        MoveRecord(turn=t, player=0, action=t, text="x", agent="a", usage=Usage(llm_calls=1, cost_usd=c))
        for t, c in [(1, 0.25), (3, 0.5)]
    ]
    moves.append(MoveRecord(turn=2, player=1, action=2, text="o", agent="b", usage=Usage(llm_calls=1)))
    rec = MatchRecord(
        match_id="m",
        tournament="t",
        game={"name": "tic_tac_toe"},
        seats=["a", "b"],
        seed=1,
        moves=moves,
        outcome="draw",
        returns=[0.0, 0.0],
        ranks=[1, 1],
    )
    table = {s.agent: s for s in standings([rec, rec])}
    assert table["a"].cost_usd == 1.5 and table["b"].cost_usd is None  # unknown, not 0


async def test_a_match_record_carries_each_seats_cost(nc) -> None:
    rec, _, agent = await _play(nc, "tic_tac_toe", 0, _policy("void"))
    priced = sum(1 for m in rec.moves if m.agent == agent)
    assert priced and rec.cost_usd == [pytest.approx(0.001 * priced), 0.0]  # the random seat cost nothing


def test_the_printed_standings_show_cost_only_when_a_call_was_priced() -> None:
    from rich.console import Console

    from spielbus.report import print_report

    def printed(cost: float | None) -> str:
        move = MoveRecord(
            turn=1, player=0, action=0, text="x", agent="a", usage=Usage(llm_calls=1, cost_usd=cost)
        )
        rec = MatchRecord(
            match_id="m", tournament="t", game={"name": "tic_tac_toe"}, seats=["a", "b"], seed=1,
            moves=[move], outcome="draw", returns=[0.0, 0.0], ranks=[1, 1],
        )  # fmt: skip
        console = Console(record=True, width=240)
        print_report(console, [rec], standings([rec]), [], "run")
        return console.export_text()

    assert "cost $" in printed(0.125) and "0.1250" in printed(0.125)
    assert "cost $" not in printed(None)


# -- what spectators see --------------------------------------------------------------------------


@pytest.mark.parametrize(("game", "live"), [("tic_tac_toe", True), ("leduc_poker", False)])
async def test_thinking_reaches_spectators_under_the_private_information_rule(
    nc, game: str, live: bool
) -> None:
    rec, events, agent = await _play(nc, game, 0, _policy("void"))
    mine = [m for m in rec.moves if m.agent == agent]
    assert mine and all(m.calls and m.calls[0].reasoning for m in mine)  # the record keeps it all
    moved = [e.move for e in events if e.type == "moved" and e.move is not None and e.move.agent == agent]
    shown = [c for m in moved for c in (m.calls or [])]
    assert shown if live else True
    assert all((c.reasoning is not None) == live for c in shown)
    assert all(c.prompt_tokens == 10 for c in shown)  # sizes and classes go out live either way
    ended = next(e for e in events if e.type == "ended")
    assert ended.record is not None
    assert all(m.calls and m.calls[0].reasoning for m in ended.record.moves if m.agent == agent)


# -- the live page's feed, the live page, `spielbus replay --show` ---------------------------------


async def test_the_feed_shows_thinking_under_the_rule_and_restarts_a_voided_play(nc) -> None:
    rec, events, agent = await _play(nc, "leduc_poker", 1, _policy("void"))
    feed = MatchFeed()
    for e in events:
        if e.type != "ended":
            feed.apply(e)
    view = feed.matches[rec.match_id]
    assert view.voided == 1 and view.faults == []  # the voided play's steps are gone
    live = [c for s in view.steps if s.agent == agent for c in (s.calls or [])]
    assert live and all(c.reasoning is None and c.outcome == "answered" for c in live)
    feed.apply(next(e for e in events if e.type == "ended"))
    ended = [c for s in view.steps if s.agent == agent for c in (s.calls or [])]
    assert ended and all(c.reasoning and c.reasoning.startswith("my secret view") for c in ended)


def test_replay_show_prints_each_moves_calls_with_the_thinking_folded(tmp_path, capsys) -> None:
    calls = [
        LLMCall.from_summary({**_call(1), "reasoning": "step " * 100, "answer": '{"action": "x(0,0)"}'}),
        LLMCall(id="c2", outcome="truncated", status=200, finish_reason="length"),
    ]
    rec = MatchRecord(
        match_id="t-00000",
        tournament="t",
        game={"name": "tic_tac_toe"},
        seats=["a", "b"],
        seed=1,
        moves=[MoveRecord(turn=1, player=0, action=0, text="x(0,0)", agent="a", calls=calls)],
        faults=[FaultRecord(turn=2, seat=1, agent="b", reason="provider", detail="503", calls=[calls[1]])],
        outcome="void",
        voided=[VoidedAttempt(agent="b", turn=2, cause="503 Service Unavailable")],
    )
    agents = '[agents.a]\nkind = "random"\n[agents.b]\nkind = "random"\n'
    (tmp_path / "tournament.toml").write_text('name = "t"\n[[games]]\nname = "tic_tac_toe"\n' + agents)
    (tmp_path / "matches.jsonl").write_text(rec.model_dump_json() + "\n")
    match = MatchSpec(match_id=rec.match_id, tournament="t", game=rec.game, seats=rec.seats, seed=1)
    (tmp_path / "schedule.jsonl").write_text(match.model_dump_json() + "\n")
    assert replay.main([str(tmp_path), "--show", "1"]) == 0
    out = capsys.readouterr().out
    assert "call-1: answered · HTTP 200 · finish stop" in out and "c2: truncated" in out
    assert 'answer: {"action": "x(0,0)"}' in out
    assert "thinking (500 chars): step step" in out and "--thinking shows it whole" in out
    assert "voided at turn 2 by b's provider: 503 Service Unavailable" in out
    assert "fault provider: 503" in out
    assert replay.main([str(tmp_path), "--show", "1", "--thinking"]) == 0
    assert "--thinking shows it whole" not in capsys.readouterr().out


@pytest.mark.slow
async def test_the_live_page_folds_each_moves_calls_and_thinking() -> None:
    from playwright.async_api import async_playwright

    from tests.test_live_page import CHROMIUM_ARGS, _chromium

    chromium = _chromium()
    call = LLMCall.from_summary({**_call(1), "reasoning": "I take the centre", "answer": "x(1,1)"})
    rec = MatchRecord(
        match_id=uid("page"),
        tournament="t",
        game={"name": "tic_tac_toe"},
        seats=["a", "b"],
        seed=1,
        moves=[MoveRecord(turn=1, player=0, action=4, text="x(1,1)", agent="a", calls=[call])],
        outcome="draw",
        returns=[0.0, 0.0],
        ranks=[1, 1],
    )
    feed = MatchFeed()
    feed.apply(ended_event(rec))
    server = await start_web(feed, 0)
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
            try:
                page = await browser.new_page()
                await page.goto(server.url + "#match=" + rec.match_id)
                folded = page.locator("#moves td.calls > details.calls")
                await folded.wait_for(timeout=60_000)
                assert (await folded.locator("> summary").inner_text()).startswith(
                    "1 call: answered · thinking 17 chars, 3 tokens"
                )
                thinking = page.locator("#moves pre.thinking")
                assert not await thinking.is_visible()  # folded until asked
                await folded.locator("> summary").click()
                assert await page.locator("#moves pre.answer").inner_text() == "x(1,1)"
                assert (
                    "answered · HTTP 200 · finish stop" in await folded.locator(".call .muted").inner_text()
                )
                assert not await thinking.is_visible()  # folded again inside the call
                await page.locator("#moves details.thinking > summary").click()
                assert await thinking.inner_text() == "I take the centre"
                # The page renders the match again on its next refresh: the folds stay as they were.
                path = f"/api/matches/{rec.match_id}"
                async with page.expect_response(lambda r: r.url.endswith(path), timeout=60_000):
                    pass
                await page.evaluate("() => new Promise(r => requestAnimationFrame(() => r(null)))")
                assert await thinking.is_visible()
            finally:
                await browser.close()
    finally:
        await server.stop()


def test_sprt_scores_no_game_a_provider_fault_touched() -> None:
    base = {
        "match_id": "m",
        "tournament": "t",
        "game": {"name": "tic_tac_toe"},
        "seats": ["a", "b"],
        "seed": 1,
    }
    won = MatchRecord(**base, outcome="decisive", returns=[1.0, -1.0], ranks=[1, 2])
    touched = won.model_copy(update={"faults": [FaultRecord(turn=1, seat=1, agent="b", reason="provider")]})
    unplayed = MatchRecord(**base, outcome="void", returns=[0.0, 0.0], ranks=[1, 1])
    assert game_score(won, "a") == 1.0
    assert game_score(touched, "a") is None and game_score(unplayed, "a") is None
