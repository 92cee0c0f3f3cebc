"""LLM budgets as a time control: caps on calls and tokens per move and per match, fault `budget`."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from nats.aio.msg import Msg

from bus.protocol import (
    Budget,
    BudgetLimits,
    FaultPolicy,
    GameSpec,
    MatchRecord,
    Move,
    MoveStats,
    Turn,
    Usage,
)
from referee.budget import BudgetMeter, budget_label, by_budget_class
from referee.config import ConfigError, parse_config
from referee.ratings import standings
from tests.helpers import play, raw_responder, spec, uid


def _move(calls: int, tokens: int = 0, metered: Mapping[str, object] | None = None) -> Move:
    stats = MoveStats.model_validate({"metered": metered}) if metered is not None else None
    return Move(
        match_id="m", turn=1, action=0, usage=Usage(llm_calls=calls, prompt_tokens=tokens), stats=stats
    )


def test_per_move_and_per_match_caps() -> None:
    budget = Budget(per_move=BudgetLimits(llm_calls=2), per_match=BudgetLimits(tokens=250))
    meter = BudgetMeter({"a": budget})
    assert meter.charge("a", _move(2, 100))[2] is None
    assert meter.charge("b", _move(50, 10_000))[2] is None  # no budget: unlimited
    assert meter.charge("a", _move(3, 10))[2] == "per-move budget exceeded: llm_calls 3 > 2"
    assert meter.turn_budget("b") is None
    told = meter.turn_budget("a")
    assert told is not None and told.per_move.llm_calls == 2 and told.left.tokens == 140  # 250 less 100 + 10
    assert told.left.llm_calls is None  # no per-match cap on calls: nothing to tell
    # 100 + 10 + 141 = 251 tokens over the match: the per-match cap of 250 falls.
    assert meter.charge("a", _move(1, 141))[2] == "per-match budget exceeded: tokens 251 > 250"


def test_larger_metered_figure_is_charged_and_the_discrepancy_recorded() -> None:
    meter = BudgetMeter({"a": Budget(per_move=BudgetLimits(llm_calls=3))})
    usage, stats, over = meter.charge("a", _move(1, 10, metered={"llm_calls": 2, "prompt_tokens": 40}))
    assert over is None and (usage.llm_calls, usage.prompt_tokens) == (2, 40)
    assert stats is not None
    disc = stats.model_dump()["usage_discrepancy"]
    assert disc["reported"]["llm_calls"] == 1 and disc["metered"]["llm_calls"] == 2
    # Under-reporting does not escape the cap: the metered 5 calls break it.
    assert (
        meter.charge("a", _move(1, metered={"llm_calls": 5}))[2]
        == "per-move budget exceeded: llm_calls 5 > 3"
    )
    # A smaller or malformed metered figure changes nothing and records nothing.
    for metered in ({"llm_calls": 0}, {"llm_calls": -4}, {"llm_calls": "9"}):
        usage, stats, over = meter.charge("b", _move(2, metered=metered))
        assert usage.llm_calls == 2 and "usage_discrepancy" not in (stats.model_dump() if stats else {})


def test_budget_in_the_tournament_file() -> None:
    base = '[[games]]\nname = "tic_tac_toe"\n[agents.a]\nkind = "random"\n[agents.b]\nkind = "random"\n'
    cfg = parse_config('[budget]\nper_move = { llm_calls = 4 }\nlabel = "blitz"\n' + base + "budget = {}\n")
    budgets = cfg.seat_budgets(["a", "b"])
    assert budgets["a"].label == "blitz" and budgets["b"] == Budget()  # b's own budget replaces [budget]
    for bad, key in (
        ("[budget]\nper_move = { tokns = 4 }\n", "budget.per_move.tokns: unknown key"),
        ("[budget]\nper_match = { tokens = -1 }\n", "budget.per_match.tokens"),
        ("[budget]\nper_move = { llm_calls = 1.5 }\n", "budget.per_move.llm_calls"),
    ):
        with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
            parse_config(bad + base)


def test_standings_per_budget_class() -> None:
    def rec(budget: Budget | None) -> MatchRecord:
        return MatchRecord(
            match_id=uid("m"), tournament="t", game=GameSpec(name="tic_tac_toe"), seats=["a", "r"], seed=1,
            returns=[1.0, -1.0], ranks=[1, 2], outcome="decisive", budgets={"a": budget} if budget else {},
        )  # fmt: skip

    small = Budget(per_move=BudgetLimits(tokens=500))
    rows = {s.agent: s.played for s in standings(by_budget_class([rec(small), rec(small), rec(None)]))}
    assert rows == {"a (move:tokens=500)": 2, "a (unlimited)": 1, "r (unlimited)": 3}
    assert budget_label(Budget(label="blitz")) == "blitz"


async def test_referee_faults_an_agent_over_its_budget(nc) -> None:
    """Real bus: a bot that reports one call but whose meter says four goes over a 3-call budget."""
    cheap, greedy = uid("cheap"), uid("greedy")

    async def honest(turn: Turn, msg: Msg) -> bytes:
        return Move(match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[0].id,
                    usage=Usage(llm_calls=1, prompt_tokens=10)).model_dump_json().encode()  # fmt: skip

    async def under_reporting(turn: Turn, msg: Msg) -> bytes:
        metered = MoveStats.model_validate({"metered": {"llm_calls": 4}})
        move = Move(match_id=turn.match_id, turn=turn.turn, action=turn.legal_actions[0].id,
                    usage=Usage(llm_calls=1), stats=metered)  # fmt: skip
        return move.model_dump_json().encode()

    budget = Budget(per_move=BudgetLimits(llm_calls=3), per_match=BudgetLimits(tokens=25))
    match = spec("tic_tac_toe", [greedy, cheap]).model_copy(
        update={"budgets": {greedy: budget, cheap: budget}}
    )
    async with raw_responder(nc, greedy, under_reporting), raw_responder(nc, cheap, honest):
        rec = await play(nc, match)
    assert rec.outcome == "forfeit" and rec.forfeited == [0]
    (fault,) = rec.faults
    assert (fault.reason, fault.agent) == ("budget", greedy)
    assert "llm_calls 4 > 3" in fault.detail
    assert rec.budgets is not None and rec.budgets[greedy] == budget

    # Per match: the honest bot's 10 tokens a move break 25 tokens on its third move; `random` plays on.
    match = spec("tic_tac_toe", [cheap, uid("free")], policy=FaultPolicy(kind="random"))
    match = match.model_copy(update={"budgets": {cheap: budget}})
    async with raw_responder(nc, cheap, honest) as asked, raw_responder(nc, match.seats[1], honest) as free:
        rec = await play(nc, match)
    # Each turn tells the seat its budget and what is left of the match's (the unbudgeted seat: none).
    lefts = [t.budget.left.tokens for t in asked if t.budget is not None]
    assert lefts[:3] == [25, 15, 5] and len(lefts) == len(asked)
    assert all(t.budget is not None and t.budget.per_move.llm_calls == 3 for t in asked)
    assert free and all(t.budget is None for t in free)
    assert rec.outcome != "forfeit"
    assert [f.reason for f in rec.faults][:1] == ["budget"]
    assert rec.faults[0].turn == 5 and "per-match budget exceeded: tokens 30 > 25" in rec.faults[0].detail
    assert all(m.forced for m in rec.moves if m.turn >= 5 and m.agent == cheap)
