"""The fault policy: what the referee does after an agent's bad answer, as one pure function.

`decide(reason, attempt, policy)` reads no clock, no bus and no state: given why the answer was
refused (a `FaultReason`), which ask of this decision it was (1 for the first), and the
tournament's `FaultPolicy`, it names the consequence:

- `random` policy: play a uniformly random legal action for the seat (the fault is recorded);
- `retry` policy: ask the same decision again, with the reason, while `attempt <= retries`;
  then forfeit. `no_responder` is never retried by the policy: the request itself has already
  asked again with backoff until the turn's deadline (referee/request.py), so nobody listens;
- `forfeit` policy (the default): the seat forfeits the match.

A `provider` fault (the agent's LLM provider failed the decision, not the model) follows the
policy's `provider` rule instead of `kind`: `void` (the default: the match is voided and played
again, referee/worker.py), `forfeit` or `random`. It is never retried by `retry`: asking again
at once would only hammer a provider that is down.

Limits: only an agent's faults come here. The referee's and the bus's own failures (a lost
connection, the referee's event loop stalling at a deadline) are never an agent's and never
reach the policy (referee/request.py raises `MatchAborted` or `RefereeLag` for those).
"""

from __future__ import annotations

from typing import Literal

from bus.protocol import FaultPolicy, FaultReason

Decision = Literal["forfeit", "retry", "random", "void"]


def decide(reason: FaultReason, attempt: int, policy: FaultPolicy) -> Decision:
    """The consequence of a refused answer on the `attempt`-th ask (from 1) of one decision."""
    if attempt < 1:
        raise ValueError(f"attempt counts from 1, not {attempt}")
    if reason == "provider":
        return policy.provider
    if policy.kind == "random":
        return "random"
    if policy.kind == "retry" and attempt <= policy.retries and reason != "no_responder":
        return "retry"
    return "forfeit"


def retry_note(reason: FaultReason, detail: str) -> str:
    """What the next ask's `retry` field tells the agent about its refused answer."""
    return f"{reason}: {detail}"
