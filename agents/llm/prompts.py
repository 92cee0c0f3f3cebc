"""Generic prompt pieces: the text view of a turn for any game (observation, history, legal moves).

Game-specific prompts (seed 000's Ghost and Word chain) live in `agents/llm/proposers.py`,
shared by the strategies that propose actions. Limits: rules are truncated to `RULES_CHARS` and
the history to the last `HISTORY_ITEMS` steps so a prompt fits the small embedded model's context.
"""

from __future__ import annotations

import json

from bus.protocol import Turn

RULES_CHARS = 1500
HISTORY_ITEMS = 40


def history_text(turn: Turn) -> str:
    steps = [f"P{h.player}: {h.text}" for h in turn.history[-HISTORY_ITEMS:] if h.text is not None]
    return ", ".join(steps) if steps else "(none)"


def legal_texts(turn: Turn) -> list[str]:
    return [a.text for a in turn.legal_actions]


def system_prompt(turn: Turn, rules: str | None) -> str:
    text = f"You are an expert player of the game {turn.game.label()}. You play as player {turn.seat}."
    if rules:
        text += "\n\nRules:\n" + rules[:RULES_CHARS]
    return text


def state_prompt(turn: Turn) -> str:
    return (
        f"Current state:\n{turn.observation}\n\n"
        f"Moves so far: {history_text(turn)}\n"
        f"Legal moves: {', '.join(legal_texts(turn))}"
    )


def choose_prompt(turn: Turn) -> str:
    example = json.dumps({"action": turn.legal_actions[0].text})
    return (
        f"{state_prompt(turn)}\n\n"
        f"Choose your next move. Answer with exactly one of the legal moves, as JSON like {example}."
    )


def retry_prompt(answer: str, turn: Turn) -> str:
    shown = answer.strip()[:80] or "(empty)"
    return (
        f"Your answer {shown!r} is not one of the legal moves. "
        f"Answer with exactly one of: {', '.join(legal_texts(turn))}."
    )
