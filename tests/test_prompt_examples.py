"""No prompt shows a legal move as the answer to copy (issue 26).

Before, `choose_prompt` and `GenericProposer` wrote `{"action": "<first legal move>"}` as their
JSON example, and the small model answered the example (`benchmarks/example_copy.py` measures
it). Now the example holds a placeholder. Checked on every position of a few random games: the
JSON example of each prompt names no legal move.
"""

from __future__ import annotations

import random
import re

import pyspiel
import pytest

from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig
from agents.llm.prompts import choose_prompt
from agents.llm.proposers import GenericProposer, ProposerSettings, action_text
from agents.llm_mcts import pruner_prompt
from bus.protocol import GameSpec, Turn
from games.loader import load_game
from games.view import build_turn

_EXAMPLE = re.compile(r'\{"action":\s*"([^"]*)"\}')


def _positions(name: str) -> list[tuple[pyspiel.State, Turn]]:
    game = load_game(GameSpec(name=name))
    rng = random.Random(3)
    out = []
    state = game.new_initial_state()
    while not state.is_terminal():
        turn = build_turn(
            state=state, spec=GameSpec(name=name), match_id="m", seat=state.current_player(),
            seats=["a", "b"], turn=1, deadline_ms=1000, history=None,
        )  # fmt: skip
        out.append((state.clone(), turn))
        state.apply_action(rng.choice(state.legal_actions()))
    return out


@pytest.mark.parametrize("name", ["tic_tac_toe", "connect_four"])
def test_no_prompt_example_is_a_legal_move(name: str) -> None:
    # Only its prompts are read: the client is never asked anything.
    proposer = GenericProposer(LLMClient(LLMConfig(base_url="http://127.0.0.1:9/v1")), ProposerSettings())
    for state, turn in _positions(name):
        legal = {la.text for la in turn.legal_actions}
        options = [action_text(state, a) for a in state.legal_actions()]
        pruner = pruner_prompt(state, [action_text(state, a) for a in state.legal_actions()])
        for prompt in (choose_prompt(turn), proposer._prompt(state, options, []), pruner):
            examples = _EXAMPLE.findall(prompt)
            assert examples, f"no JSON answer form in {prompt!r}"
            assert not legal & set(examples), f"the prompt's example is a legal move: {examples}"
