"""`policy_table`: the table where it knows the information set, the fallback elsewhere, counted in stats."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from agents.base import MatchContext, StrategyOptions
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig
from agents.policy_table import PolicyTableOptions, PolicyTableStrategy, load_table
from agents.random_agent import RandomStrategy
from agents.registry import strategy_class
from games.loader import load_game, parse_spec
from referee.turns import TurnFrame, build_turn
from research.coach.cli import main as selfplay
from tests.helpers import play, serving, spec, uid
from tests.llm_standins import ScriptedBackend


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("pt") / "kuhn.jsonl"
    assert selfplay(["solve", "kuhn_poker", "--iterations", "200", "--out", str(out)]) == 0
    return out


def kuhn_turn(history: list[int]):
    game = load_game("kuhn_poker")
    state = game.new_initial_state()
    for a in history:
        state.apply_action(a)
    seat = state.current_player()
    return build_turn(TurnFrame("m", parse_spec("kuhn_poker"), ["a", "b"], 5000), state, seat, 1, None)


async def test_known_information_sets_play_the_table(table: Path) -> None:
    strat = PolicyTableStrategy(PolicyTableOptions(table=str(table), source="policy", seed=1))
    turn = kuhn_turn([2, 0])  # player 0 holds the king
    decision = await strat.decide(turn, MatchContext("m"))
    want = load_table(table, "policy")[turn.observation]
    assert decision.stats is not None and decision.stats.model_extra == {"table": 1}
    assert decision.policy == pytest.approx({str(a): p for a, p in want.items()})
    assert decision.usage.llm_calls == 0


async def test_unknown_information_sets_fall_back_to_the_llm_or_uniform(table: Path) -> None:
    # A table made for another game knows none of leduc's information sets.
    game = load_game("leduc_poker")
    state = game.new_initial_state()
    state.apply_action(0)
    state.apply_action(1)
    turn = build_turn(TurnFrame("m", parse_spec("leduc_poker"), ["a", "b"], 20000), state, 0, 1, None)
    k = len(turn.legal_actions)
    stand_in = ScriptedBackend(script=["<action>[" + ", ".join(["0"] * (k - 1) + ["1"]) + "]</action>"])
    llm = PolicyTableStrategy(
        PolicyTableOptions(table=str(table), source="policy", constrain=False),
        client=LLMClient(LLMConfig(), backend=stand_in),
    )
    decision = await llm.decide(turn, MatchContext("m"))
    assert decision.stats is not None and (decision.stats.model_extra or {}).get("llm") == 1
    assert decision.action == turn.legal_actions[-1].id and decision.usage.llm_calls == 1
    uni = PolicyTableStrategy(
        PolicyTableOptions(table=str(table), source="policy", fallback_policy="uniform")
    )
    decision = await uni.decide(turn, MatchContext("m"))
    assert decision.stats is not None and decision.stats.model_extra == {"uniform": 1}
    assert decision.policy == pytest.approx({str(a.id): 1 / k for a in turn.legal_actions})


def test_bad_options_are_refused(tmp_path: Path, table: Path) -> None:
    cls = strategy_class("policy_table")
    with pytest.raises(ValidationError, match="does not exist"):
        cls.from_options({"table": str(tmp_path / "none.jsonl")})
    with pytest.raises(ValidationError):
        cls.from_options({"table": str(table), "source": "nonsense"})
    broken = tmp_path / "broken.jsonl"
    broken.write_text(table.read_text().splitlines()[0][:30] + "\n")
    with pytest.raises(ValidationError, match=r"broken\.jsonl:1"):
        cls.from_options({"table": str(broken), "source": "policy"})


async def test_plays_over_the_bus_and_reports_table_moves(nc, table: Path) -> None:
    me, rnd = uid("table"), uid("rand")
    strat = PolicyTableStrategy(
        PolicyTableOptions(table=str(table), source="policy", fallback_policy="uniform")
    )
    async with serving(nc, strat, me), serving(nc, RandomStrategy(StrategyOptions(seed=2)), rnd):
        recs = [
            await play(nc, spec("kuhn_poker", [me, rnd] if i % 2 == 0 else [rnd, me], seed=i))
            for i in range(6)
        ]
    mine = [m for r in recs for m in r.moves if m.player >= 0 and r.seats[m.player] == me]
    assert mine and all(m.stats is not None and m.stats.model_extra == {"table": 1} for m in mine)
    assert all(m.policy for m in mine)
