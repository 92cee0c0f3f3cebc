"""The `ollama` backend: the official `ollama` AsyncClient on Ollama's native API (`/api/chat`).

Tokens come from `prompt_eval_count` / `eval_count`. A constraint is sent as
`format` (a JSON schema). Limits: one sample per request (Ollama has no `n`);
Ollama omits `prompt_eval_count` when the prompt was fully cached on its side,
so prompt tokens then count as 0.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import ollama

from agents.llm.base import BackendReply, BackendRequest, LLMTimeout, LLMUnavailable
from agents.llm.config import LLMConfig


class OllamaBackend:
    name = "ollama"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._client = ollama.AsyncClient(host=config.resolved_base_url(), timeout=config.timeout_s)

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        options: dict[str, Any] = {"temperature": request.temperature, "num_predict": request.max_tokens}
        if request.seed is not None:
            options["seed"] = request.seed
        if request.top_p is not None:
            options["top_p"] = request.top_p
        options.update(request.extra)
        try:
            resp = await asyncio.wait_for(
                self._client.chat(
                    model=request.model,
                    messages=request.message_dicts(),
                    stream=False,
                    format=request.schema,
                    options=options,
                ),
                timeout_s,
            )
        except (TimeoutError, httpx.TimeoutException) as exc:
            url = self.config.resolved_base_url()
            raise LLMTimeout(f"no answer from {url} within {timeout_s:.1f}s") from exc
        except ollama.ResponseError as exc:
            raise LLMUnavailable(f"HTTP {exc.status_code} from ollama: {exc.error[:300]}") from exc
        except (ConnectionError, httpx.HTTPError, ValueError) as exc:
            # ValueError: pydantic rejects a reply that is not a chat response.
            raise LLMUnavailable(f"ollama unreachable or bad reply: {exc}") from exc
        return BackendReply(
            texts=[resp.message.content or ""],
            prompt_tokens=int(resp.prompt_eval_count or 0),
            completion_tokens=int(resp.eval_count or 0),
        )

    async def aclose(self) -> None:
        await self._client.close()
