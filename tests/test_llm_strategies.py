"""LLM strategies on hand-built turns: the real embedded model for decisions, usage and the
cache; a scripted stand-in backend (tests/llm_standins.py) for exactly-bad outputs."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from agents.base import MatchContext, ProviderFailure
from agents.llm import LLMClient, LLMConfig
from agents.llm.server import EmbeddedServer
from agents.llm.strategy import NoMove
from agents.llm_mcts import LlmMctsOptions, LlmMctsStrategy
from agents.llm_policy import LLMPolicyOptions, LLMPolicyStrategy, parse_distribution
from bus.protocol import GameSpec, Turn
from games.loader import load_game, replay
from referee.turns import TurnFrame, build_turn
from tests.llm_fixtures import llm_config, llm_server
from tests.llm_standins import ScriptedBackend

__all__ = ["llm_server"]


# A generous clock: these tests assert that the real model answered, and a loaded two-core machine
# can take tens of seconds per completion of the embedded server's single queue.
def game_turn(game: str, actions: list[int], deadline_ms: int = 180_000, rules: str | None = None) -> Turn:
    state = replay(load_game(game), actions)
    return build_turn(
        TurnFrame("m-test", GameSpec(name=game), ["me", "you"], deadline_ms),
        state,
        state.current_player(),
        len(actions),
        None,
        rules=rules,
    )


def ttt(actions: list[int] | None = None, **kw: Any) -> Turn:
    return game_turn("tic_tac_toe", actions or [], **kw)


def legal_ids(turn: Turn) -> set[int]:
    return {a.id for a in turn.legal_actions}


def policy(server: EmbeddedServer, **opts: Any) -> LLMPolicyStrategy:
    options = LLMPolicyOptions.model_validate({"seed": 1, "llm": llm_config(server), **opts})
    return LLMPolicyStrategy(options)


def scripted(script: list[str], **opts: Any) -> tuple[LLMPolicyStrategy, ScriptedBackend]:
    backend = ScriptedBackend(script=list(script))
    options = LLMPolicyOptions.model_validate({"seed": 1, **opts})
    return LLMPolicyStrategy(options, LLMClient(LLMConfig(), backend=backend)), backend


# --- llm_policy with the real model ------------------------------------------------------


@pytest.mark.parametrize("mode", ["direct", "vote", "distribution"])
async def test_llm_policy_constrained_is_legal_and_counted(llm_server: EmbeddedServer, mode: str) -> None:
    strat = policy(llm_server, mode=mode, k=3)
    ctx = MatchContext("m-test")
    try:
        for actions in ([], [4, 0, 8]):  # the first turn carries the rules, the second reads them cached
            turn = ttt(actions, rules="Tic-tac-toe: three in a row wins." if not actions else None)
            before, sent = strat.llm.replies, strat.llm.requests_sent
            d = await strat.decide(turn, ctx)
            assert d.action in legal_ids(turn)
            # Answered requests are the move's llm_calls; a request that failed (a slow machine
            # can time one out) is reported as a failure in the stats instead.
            assert d.usage.llm_calls == strat.llm.replies - before
            failures = (d.stats.model_extra or {}).get("llm_failures", 0) if d.stats else 0
            assert d.usage.llm_calls + failures == strat.llm.requests_sent - sent
            assert d.usage.llm_calls >= (3 if mode == "vote" else 1) or d.usage.cache_hits > 0
            assert d.usage.llm_calls == 0 or d.usage.prompt_tokens > 0
            if mode == "distribution" and d.policy is not None:
                assert set(d.policy) == {str(i) for i in legal_ids(turn)}
                assert abs(sum(d.policy.values()) - 1) < 1e-6
        assert ctx.data["rules"].startswith("Tic-tac-toe")  # cached from the first turn
    finally:
        await strat.close()


async def test_llm_policy_unconstrained_never_crashes(llm_server: EmbeddedServer) -> None:
    strat = policy(llm_server, constrain=False)
    try:
        turn = ttt([4])
        d = await strat.decide(turn, MatchContext("m"))
        assert d.action in legal_ids(turn)  # legal by the model, or by the counted fallback
        stats = d.stats.model_dump() if d.stats else {}
        if stats.get("fallback"):
            assert stats["bad_outputs"] == 2
    finally:
        await strat.close()


async def test_repeated_decision_answered_from_cache(llm_server: EmbeddedServer) -> None:
    strat = policy(llm_server)
    try:
        turn = ttt([0])
        first = await strat.decide(turn, MatchContext("a"))
        sent = strat.llm.requests_sent
        second = await strat.decide(turn, MatchContext("b"))
        assert strat.llm.requests_sent == sent  # no new server call
        assert second.usage.llm_calls == 0 and second.usage.cache_hits == first.usage.llm_calls
        assert second.action == first.action
    finally:
        await strat.close()


# --- bad output, scripted -----------------------------------------------------------------


@pytest.mark.parametrize("bad", ["", "I like the centre square a lot.", '{"action": "x(9,9)"}', "o(0,0)"])
async def test_bad_direct_output_retried_then_random(bad: str) -> None:
    strat, backend = scripted([bad, bad])
    turn = ttt()
    d = await strat.decide(turn, MatchContext("m"))
    assert d.action in legal_ids(turn)
    stats = d.stats.model_dump() if d.stats else {}
    assert stats["bad_outputs"] == 2 and stats["fallback"] == 1
    assert d.usage.llm_calls == 2 == len(backend.requests)
    # The retry tells the model why its answer was refused.
    assert "not one of the legal moves" in backend.requests[1].messages[-1][1]


async def test_bad_output_then_good_answer() -> None:
    strat, _ = scripted(["nonsense", "x(1,1)"], constrain=False)
    turn = ttt()
    d = await strat.decide(turn, MatchContext("m"))
    assert d.action == 4 and d.usage.llm_calls == 2 and d.stats is not None
    assert d.stats.model_dump()["bad_outputs"] == 1


async def test_bad_output_with_clock_fallback_gives_no_move() -> None:
    strat, _ = scripted(["", ""], fallback="clock")
    with pytest.raises(NoMove):
        await strat.decide(ttt(), MatchContext("m"))


async def test_vote_majority_of_legal_answers() -> None:
    strat, backend = scripted(["x(1,1)", "prose", "x(0,0)", "x(1,1)", "x(9,9)"], mode="vote", k=5)
    d = await strat.decide(ttt(), MatchContext("m"))
    assert d.action == 4 and d.usage.llm_calls == 5
    assert d.stats is not None and d.stats.pruned_illegal == 2
    assert [r.temperature for r in backend.requests] == [0.7] * 5


@pytest.mark.parametrize(
    ("text", "renormalize", "expect_policy"),
    [
        ("<action>[0.5, 0.5, 0, 0, 0, 0, 0, 0, 0]</action>", True, True),
        ("<action>[1, 1, 0, 0, 0, 0, 0, 0, 0]</action>", True, True),  # sums to 2: renormalised
        ("<action>[1, 1, 0, 0, 0, 0, 0, 0, 0]</action>", False, False),
        ("<action>[0.5, 0.5]</action>", True, False),  # wrong length
        ("I think the centre.", True, False),
        ("<action>[0, 0, 0, 0, 0, 0, 0, 0, 0]</action>", True, False),
    ],
)
async def test_distribution_outputs(text: str, renormalize: bool, expect_policy: bool) -> None:
    strat, _ = scripted([text, text], mode="distribution", renormalize=renormalize)
    turn = ttt()
    d = await strat.decide(turn, MatchContext("m"))
    assert d.action in legal_ids(turn)
    if expect_policy:
        assert d.policy is not None and d.action in (0, 1)
        assert d.policy["0"] == pytest.approx(0.5) and abs(sum(d.policy.values()) - 1) < 1e-9
    else:
        assert d.policy is None and d.stats is not None
        assert d.stats.model_dump()["fallback"] == 1 and d.usage.llm_calls == 2


def test_parse_distribution() -> None:
    assert parse_distribution("<think>[9]</think><action>\n[0.7, 0.2, 0.1]\n</action>") == [0.7, 0.2, 0.1]
    assert parse_distribution("[0.25, 0.75]") == [0.25, 0.75]
    assert parse_distribution("no numbers") is None


async def test_server_down_is_a_provider_failure_not_a_move() -> None:
    # An outage is the provider's, never the model's play (issue 38): no random move, the failure.
    strat, backend = scripted(["!down"] * 8)
    strat.llm.config.backoff_s = 0.01
    with pytest.raises(ProviderFailure) as err:
        await strat.decide(ttt(), MatchContext("m"))
    assert len(err.value.calls) == 1 and "server down" in err.value.cause
    assert len(backend.requests) == strat.llm.config.retries + 1


async def test_slow_server_never_passes_the_deadline() -> None:
    class Slow(ScriptedBackend):
        async def complete(self, request: Any, timeout_s: float) -> Any:
            import asyncio

            await asyncio.Event().wait()  # never answers

    options = LLMPolicyOptions(seed=1, margin_ms=200)
    strat = LLMPolicyStrategy(options, LLMClient(LLMConfig(), backend=Slow()))
    turn = ttt(deadline_ms=1000)
    # The server never answers: the decision ends by the agent's own deadline, as the provider's failure.
    with pytest.raises(ProviderFailure) as err:
        await asyncio.wait_for(strat.decide(turn, MatchContext("m")), 60)  # a hang guard only
    assert err.value.calls


class CountingBackend(ScriptedBackend):
    """A stand-in LLM server that counts the requests in flight at once (each answers after a
    short pause, so requests sent together overlap)."""

    inflight: int = 0
    peak: int = 0

    async def complete(self, request: Any, timeout_s: float) -> Any:
        self.inflight += 1
        self.peak = max(self.peak, self.inflight)
        try:
            await asyncio.sleep(0.05)
            return await super().complete(request, timeout_s)
        finally:
            self.inflight -= 1


@pytest.mark.parametrize("parallel", [1, 4])
async def test_llm_mcts_sends_the_critic_calls_of_a_batch_together(parallel: int) -> None:
    # Every reply is a score: the pruner finds no move in it and keeps every legal action, the
    # critic reads 100. Depth 1: after the root's one pruner call, each simulation asks the critic.
    backend = CountingBackend(default='{"score": 100}')
    options = LlmMctsOptions(seed=1, simulations=8, depth=1, k=1, critic="llm", parallel=parallel)
    strat = LlmMctsStrategy(options, LLMClient(LLMConfig(cache=False), backend=backend))
    turn = ttt(deadline_ms=60_000)
    d = await strat.decide(turn, MatchContext("m"))
    assert d.action in legal_ids(turn) and d.stats is not None
    assert d.stats.model_dump()["simulations"] == 8
    assert len(backend.requests) == 1 + 8
    assert backend.peak == parallel  # the batch's critic calls overlap; one at a time when 1


# --- complete matches through the referee over NATS, real model ----------------------------

SMALL: dict[str, dict[str, Any]] = {
    "llm_policy": {"mode": "direct"},
    # Depth 2 (a minimax backup over the opponent's replies) with one one-step rollout per frontier
    # state: 7 model calls a move, where 3-step rollouts took 15 (the suite's slowest test).
    "minimax_tot": {"depth": 2, "n": 2, "rollouts": 1, "rollout_max_steps": 1, "llm_check": False},
    "tot": {"depth": 2, "n": 2, "llm_check": False, "max_attempts": 3},
    # Ghost's matches are long: a smaller tree keeps one on a loaded machine within the timeout.
    "llm_mcts": {"simulations": 3, "depth": 1, "k": 2, "critic": "llm"},
}


# Ghost on a list of short words: bluffing is legal, so against a random opponent (which seldom
# challenges) a match runs until the fragment is as long as the list's longest word. On the shipped
# list that was up to 46 plies, and one LLM-MCTS match took from 18 s to 144 s between runs of the
# suite; here at most five letters and a challenge.
SHORT_WORDS = "cat cart carts dog dogs door doors stop stops spot spots tree trees rain rains plane".split()


def _game(game: str, tmp_path: Path) -> str | GameSpec:
    if game != "ghost":
        return game
    words = tmp_path / "short_words.txt"  # under pytest's temp folder: allowed (tests/conftest.py)
    words.write_text("\n".join(SHORT_WORDS) + "\n", encoding="utf-8")
    return GameSpec(name="ghost", params={"words": str(words), "min_word_length": 3})


@pytest.mark.slow
@pytest.mark.timeout(900)  # real-model matches: tens of model calls per move on a shared machine
@pytest.mark.parametrize("game", ["tic_tac_toe", "ghost"])
@pytest.mark.parametrize("kind", list(SMALL))
async def test_plays_complete_match_against_random(
    nc: Any, llm_server: EmbeddedServer, kind: str, game: str, tmp_path: Path
) -> None:
    from agents.base import StrategyOptions
    from agents.llm.strategy import LLMStrategy
    from agents.random_agent import RandomStrategy
    from agents.registry import strategy_class
    from bus.protocol import VoidedAttempt
    from referee.match import MatchRunner, MatchVoided
    from tests.helpers import serving, spec, uid

    cls = strategy_class(kind)
    strat = cls(cls.Options.model_validate({"seed": 3, "llm": llm_config(llm_server), **SMALL[kind]}))
    assert isinstance(strat, LLMStrategy)
    client = strat.llm
    me, rnd = uid(kind.replace("_", "-")), uid("rnd")
    match = spec(_game(game, tmp_path), [me, rnd], seed=7, deadline_ms=60_000)
    voided: list[VoidedAttempt] = []
    async with serving(nc, strat, me), serving(nc, RandomStrategy(StrategyOptions(seed=2)), rnd):
        # A clock a loaded two-core machine can meet: the test asserts that the model answered.
        # A call the turn's clock cut on a machine loaded past that is a provider fault, which
        # voids the play; as the referee's worker does, the match is played again with the same
        # seed and secret (bounded), and the play that counted is the one checked.
        while True:
            replies, hits = client.replies, client.cache.hits
            try:
                rec = await MatchRunner(nc, match, voided=list(voided)).run()
                break
            except MatchVoided as void:
                assert "time" in void.voided.cause.lower(), void.voided  # only the clock may void it
                voided.append(void.voided)
                assert len(voided) < 3, f"voided {len(voided)} times: {voided}"
    assert rec.outcome not in ("pending", "void") and rec.error is None
    assert not [f for f in rec.faults if f.agent == me], rec.faults  # constrained: legal moves only
    mine = [m for m in rec.moves if m.agent == me]
    assert mine
    assert sum(m.usage.llm_calls for m in mine if m.usage) == client.replies - replies
    assert sum(m.usage.cache_hits for m in mine if m.usage) == client.cache.hits - hits
    assert client.replies > replies
