"""What the LLM tree searches share (`minimax_tot`, `tot`, `llm_mcts`): their common options, the
true state rebuilt from a perfect-information turn, and the proposer settings those options give.

Limits: perfect-information games only; `rebuild` refuses a turn without `state`.
"""

from __future__ import annotations

import pyspiel
from pydantic import Field

from agents.llm.base import LLMError
from agents.llm.proposers import ProposerSettings
from agents.llm.strategy import LLMStrategyOptions
from bus.protocol import Turn
from games.loader import load_game, replay


class SearchOptions(LLMStrategyOptions):
    """Options shared by the LLM tree searches (minimax_tot, tot)."""

    n: int = Field(default=3, ge=1, le=20, description="Actions generated per state, at most.")
    temperature: float = Field(
        default=0.5, ge=0.0, le=2.0, description="Generation temperature (Minimax-ToT paper: 0.5)."
    )
    constrain: bool = Field(default=True, description="Decode under a schema (prefix, legal texts).")
    llm_check: bool = Field(default=True, description="The appendix B validity prompt on each proposal.")
    max_attempts: int = Field(default=6, ge=1, le=50, description="Generation calls per state, at most.")
    max_tokens: int = Field(default=24, ge=4, le=4096)
    constrain_words: bool = Field(default=False, description="Ghost: words under a regex schema (slow).")


def rebuild(turn: Turn) -> pyspiel.State:
    if turn.state is None:
        raise LLMError(f"{turn.game.name} is not a perfect-information game: no state to search")
    return replay(load_game(turn.game), turn.state)


def settings_from(o: SearchOptions) -> ProposerSettings:
    return ProposerSettings(
        temperature=o.temperature,
        constrain=o.constrain,
        llm_check=o.llm_check,
        max_attempts=o.max_attempts,
        seed=o.seed or 0,
        max_tokens=o.max_tokens,
        constrain_words=o.constrain_words,
    )
