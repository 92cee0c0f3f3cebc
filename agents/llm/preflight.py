"""The pre-flight of a run: one real request per distinct endpoint and model, before any match.

A request an endpoint will never accept (a `config` class refusal: a reasoning model refusing
`temperature`, a server refusing `response_format` or `seed`, a wrong model name or key) would
otherwise fail every move of the tournament as the model's fallback. `preflight` sends each
distinct (backend, URL, model, options, structured-output style) of a run one request with the
run's options and a two-choice output schema, and returns the problems found: `config` refusals
name the agents, the endpoint and the refused parameter; `provider` failures (down, overloaded)
are only warnings, since the run's `[policy] provider` handles outages.

Limits: a strategy's own per-request options (a vote's `n`, a proposer's temperature) are not
sent; `n` is not a config error anyway (a 400 naming `n` switches to one choice per request).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

from agents.llm.base import LLMError
from agents.llm.client import LLMClient
from agents.llm.config import LLMConfig

PREFLIGHT_S = 30.0


@dataclass(frozen=True)
class PreflightProblem:
    agents: tuple[str, ...]
    endpoint: str  # backend/model@url
    outcome: str  # config | filtered | provider | ...
    param: str | None
    message: str

    @property
    def fatal(self) -> bool:
        return self.outcome == "config"

    def __str__(self) -> str:
        who = ", ".join(self.agents)
        refused = f" refuses `{self.param}`" if self.param else f" refused the request ({self.outcome})"
        return f"agent {who}: the LLM endpoint {self.endpoint}{refused}: {self.message[:300]}"


def _group_key(config: LLMConfig) -> str:
    data = config.model_dump(mode="json", exclude={"api_key", "cache", "cache_size", "price", "timeout_s"})
    data["base_url"] = config.resolved_base_url()
    return json.dumps(data, sort_keys=True)


async def _probe(config: LLMConfig, agents: tuple[str, ...], budget_s: float) -> PreflightProblem | None:
    client = LLMClient(config.model_copy(update={"cache": False}))
    client.tape = None  # not part of the run's recording
    try:
        await client.chat(
            [("user", 'Answer with one of the choices: "yes" or "no".')],
            choices=["yes", "no"],
            deadline=time.monotonic() + budget_s,
        )
    except LLMError as exc:
        param = getattr(exc, "param", None)
        return PreflightProblem(agents, config.label(), str(exc.outcome), param, str(exc))
    finally:
        await client.aclose()
    return None


async def preflight(configs: dict[str, LLMConfig], budget_s: float = PREFLIGHT_S) -> list[PreflightProblem]:
    """One request per distinct endpoint of `configs` (agent name -> its LLM config), concurrently."""
    groups: dict[str, list[str]] = {}
    first: dict[str, LLMConfig] = {}
    for agent, config in configs.items():
        key = _group_key(config)
        groups.setdefault(key, []).append(agent)
        first.setdefault(key, config)
    found = await asyncio.gather(*(_probe(first[k], tuple(groups[k]), budget_s) for k in groups))
    return [p for p in found if p is not None]
