"""One LLM call as the call store keeps it and a decision reports it.

A call is one request as a strategy asked it (all its attempts: retries after provider errors);
`CallRecord` is its final account. `summary()` is the dict a `Decision.calls` entry holds (and
the move's record), with these keys:

`id` (the call store's id: `<tag>/<request key, 16 hex>/<k>`, the k-th identical call of that
process, so a replay gives the same ids), `outcome` (answered | provider | config | filtered |
truncated), `status` (the last HTTP status; 200 for an answer, None when no HTTP reply came),
`finish_reason`, `attempts`, `waited_s` (time spent waiting between attempts), `prompt_tokens`,
`completion_tokens` (as charged), `reasoning_tokens` (None: not reported), `tokens_estimated`
(the reply carried no usage: the counts are estimates), `tokens_estimated_by` (how: `tokenizer`,
`server` or `chars`, agents/llm/tokens.py; None when not estimated), `cost_usd` (None: no price table),
`reasoning` (the thinking, at most `REASONING_CHARS`), `reasoning_chars` (the whole thinking's
size), `answer` (at most `ANSWER_CHARS`). These are `bus.protocol.LLMCall`'s fields.

Token estimates when a reply has no usage: the model's tokenizer where one is at hand
(agents/llm/tokens.py), else `estimate_tokens`, about 4 characters per token (OpenAI's rule of
thumb for English), at least one per message; flagged `tokens_estimated` wherever they appear.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

REASONING_CHARS = 4000
ANSWER_CHARS = 1000
CHARS_PER_TOKEN = 4


def estimate_tokens(texts: Iterable[str]) -> int:
    """A documented estimate of the tokens of `texts`: ceil(chars / 4) each, at least 1 each."""
    return sum(max(1, math.ceil(len(t) / CHARS_PER_TOKEN)) for t in texts)


@dataclass
class CallRecord:
    id: str
    outcome: str
    status: int | None = None
    finish_reason: str | None = None
    attempts: int = 0
    waited_s: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    reasoning_tokens: int | None = None
    tokens_estimated: bool = False
    tokens_estimated_by: str | None = None
    cost_usd: float | None = None
    reasoning: str = ""
    answer: str = ""
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "outcome": self.outcome,
            "status": self.status,
            "finish_reason": self.finish_reason,
            "attempts": self.attempts,
            "waited_s": round(self.waited_s, 3),
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "tokens_estimated": self.tokens_estimated,
            "tokens_estimated_by": self.tokens_estimated_by,
            "cost_usd": self.cost_usd,
            "reasoning": self.reasoning[:REASONING_CHARS],
            "reasoning_chars": len(self.reasoning),
            "answer": self.answer[:ANSWER_CHARS],
        }

    def document(self) -> dict[str, Any]:
        """The call store's line: the summary, the full thinking and the error, if any."""
        doc = self.summary()
        doc["reasoning"] = self.reasoning
        if self.error is not None:
            doc["error"] = self.error[:500]
        return doc
