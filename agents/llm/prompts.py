"""Generic prompt pieces: the text view of a turn for any game (observation, history, legal moves).

Game-specific prompts (the Minimax-ToT paper's Ghost and Word chain) live in `agents/llm/proposers.py`,
shared by the strategies that propose actions.

The layout is a stable prefix (issue 32): what never changes in a match comes first, what changes
every turn last, so an LLM server's prompt cache reuses a match's previous prompt up to its newest
move instead of re-evaluating it. In order: the game and its rules (the same for both seats), the
seat, "Moves so far" (which only grows within a match), then the observation and the (shuffled)
legal moves, then the question. Any reordering here changes every prompt's bytes, so every
recorded request key: `LLMPolicyStrategy.version` says which layout a record's agent used.

Limits: rules are truncated to `RULES_CHARS`, and the history to at most `HISTORY_ITEMS` steps so a
prompt fits the small embedded model's context. Past that many steps the shown window's start moves
forward `HISTORY_STEP` steps at a time (it shows the last 21 to 40 steps, saying how many earlier
ones it leaves out), not one step every turn: a start that moved every turn left a cache only the
rules and the seat to reuse on long games (chess, Go), where now it reuses the window too for 20
turns out of 20 (llm_policy version 3).
"""

from __future__ import annotations

import json
import random

from bus.protocol import Turn

RULES_CHARS = 1500
HISTORY_ITEMS = 40
HISTORY_STEP = 20


def history_start(steps: int) -> int:
    """The first of `steps` history steps a prompt shows: 0 up to `HISTORY_ITEMS` steps, then a
    multiple of `HISTORY_STEP` that leaves at most `HISTORY_ITEMS` shown."""
    if steps <= HISTORY_ITEMS:
        return 0
    return -(-(steps - HISTORY_ITEMS) // HISTORY_STEP) * HISTORY_STEP


def history_text(turn: Turn) -> str:
    start = history_start(len(turn.history))
    steps = [f"P{h.player}: {h.text}" for h in turn.history[start:] if h.text is not None]
    text = ", ".join(steps) if steps else "(none)"
    return f"(the first {start} moves are not shown) {text}" if start else text


def legal_texts(turn: Turn) -> list[str]:
    return [a.text for a in turn.legal_actions]


def shown_order(texts: list[str], rng: random.Random | None) -> list[str]:
    """The legal moves in the order a prompt lists them: shuffled by `rng` (the decision's seeded
    RNG: the same in a rerun, different between matches), or OpenSpiel's order when None.

    Why: with no example to copy, SmolLM2 still answers the first listed move about 68% of the time
    (`benchmarks/example_copy.py`); in OpenSpiel's order that is a fixed move (chess `a3`, Go `a1`),
    so a row would measure the action order. Shuffled, the first listed move is a random one."""
    if rng is None:
        return list(texts)
    shown = list(texts)
    rng.shuffle(shown)
    return shown


def system_prompt(turn: Turn, rules: str | None) -> str:
    """The game and its rules, then the seat: the two seats' prompts differ only from the seat on."""
    text = f"You are an expert player of the game {turn.game.label()}."
    if rules:
        text += "\n\nRules:\n" + rules[:RULES_CHARS] + "\n\n"
    else:
        text += " "
    return text + f"You play as player {turn.seat}."


def state_prompt(turn: Turn, shown: list[str] | None = None) -> str:
    """`shown`: the legal moves in the order to list them (`shown_order`); default OpenSpiel's.

    The history before the observation: it only grows during a match, so the previous turn's
    prompt is a prefix of this one up to its last move."""
    return (
        f"Moves so far: {history_text(turn)}\n\n"
        f"Current state:\n{turn.observation}\n\n"
        f"Legal moves: {', '.join(legal_texts(turn) if shown is None else shown)}"
    )


# The answer's form, with a placeholder where the move goes. Never a legal move as an example:
# the small model copies the example (issue 26: SmolLM2 answered the example in 11 to 12 of 12
# positions, wherever the example was placed; `benchmarks/example_copy.py` measures it).
ANSWER_FORMAT = 'Answer with JSON of the form {"action": "<one legal move, written exactly as listed>"}.'


def choose_prompt(turn: Turn, shown: list[str] | None = None) -> str:
    return f"{state_prompt(turn, shown)}\n\nChoose your next move. {ANSWER_FORMAT}"


def example_prompt(turn: Turn, example: str) -> str:
    """The prompt as it was before issue 26, with `example` shown as the JSON answer: kept only
    for `benchmarks/example_copy.py`, which measures how often the model copies it."""
    return (
        f"{state_prompt(turn)}\n\n"
        f"Choose your next move. Answer with exactly one of the legal moves, as JSON like "
        f"{json.dumps({'action': example})}."
    )


def retry_prompt(answer: str, turn: Turn, shown: list[str] | None = None) -> str:
    said = answer.strip()[:80] or "(empty)"
    return (
        f"Your answer {said!r} is not one of the legal moves. "
        f"Answer with exactly one of: {', '.join(legal_texts(turn) if shown is None else shown)}."
    )
