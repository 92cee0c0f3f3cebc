"""The `ollama` backend: the official `ollama` AsyncClient on Ollama's native API (`/api/chat`).

Tokens come from `prompt_eval_count` / `eval_count` (thinking included in `eval_count`). A
constraint is sent as `format` (a JSON schema). Thinking: `think` from the options is sent as
Ollama's `think`; `message.thinking` and any inline `<think>` block are split from the answer
(agents/llm/reasoning.py). `done_reason: length` is a truncated answer. Errors are classified as
the openai backend's are (agents/llm/retry.py): 429/5xx and unreadable replies `provider`, other
4xx `config`. Limits: one sample per request (Ollama has no `n`); Ollama omits
`prompt_eval_count` when the prompt was fully cached on its side, so prompt tokens then count as 0;
a reply with no `eval_count` at all is marked as without usage (the client estimates); the ollama
client gives no response headers, so a `Retry-After` is not seen (backoff applies).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import ollama

from agents.llm.base import BackendReply, BackendRequest, LLMTimeout, LLMUnavailable
from agents.llm.config import LLMConfig
from agents.llm.openai_backend import http_error
from agents.llm.reasoning import split_thinking


class OllamaBackend:
    name = "ollama"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._client = ollama.AsyncClient(host=config.resolved_base_url(), timeout=config.timeout_s)

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        options: dict[str, Any] = {"num_predict": request.max_tokens}
        if request.temperature is not None:
            options["temperature"] = request.temperature
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
                    think=request.think,
                ),
                timeout_s,
            )
        except (TimeoutError, httpx.TimeoutException) as exc:
            url = self.config.resolved_base_url()
            raise LLMTimeout(f"no answer from {url} within {timeout_s:.1f}s") from exc
        except ollama.ResponseError as exc:
            status = exc.status_code if 100 <= exc.status_code < 600 else 500
            raise http_error(status, str(exc.error), None, "ollama") from exc
        except (ConnectionError, httpx.HTTPError, ValueError, TypeError, AttributeError) as exc:
            # ValueError: pydantic rejects a reply that is not a chat response (or not JSON at all).
            raise LLMUnavailable(f"ollama unreachable or bad reply: {exc}", status=200) from exc
        message = resp.message
        if message is None:
            raise LLMUnavailable("a reply from ollama with no message", status=200)
        answer, thought = split_thinking(message.content or "", message.thinking)
        known = resp.eval_count is not None
        return BackendReply(
            texts=[answer],
            prompt_tokens=int(resp.prompt_eval_count or 0),
            completion_tokens=int(resp.eval_count or 0),
            finish_reasons=(resp.done_reason,),
            reasoning=(thought,),
            usage_known=known,
        )

    async def aclose(self) -> None:
        await self._client.close()
