"""The `openai` backend: the official `openai` AsyncClient against any OpenAI-compatible server.

Limits: llama-cpp-python's server ignores `n` (one choice per request; the client then
asks again) and llama.cpp's llama-server refuses it (the backend then stops sending `n` to that
server and returns one choice, so the client asks again the same way). llama.cpp accepts a JSON
schema as `{"type": "json_object", "schema": …}`; vLLM and OpenAI want `{"type": "json_schema", …}`. See
`LLMConfig.structured`. The client's own retries are off: the LLM layer retries
itself, within the turn's deadline.
"""

from __future__ import annotations

import asyncio
from typing import Any

import openai

from agents.llm.base import BackendReply, BackendRequest, LLMTimeout, LLMUnavailable
from agents.llm.config import LLMConfig

# llama-server's answer to `n` > 1 (tools/server/utils.hpp).
ONE_CHOICE = "Only one completion choice is allowed"


class OpenAIBackend:
    name = "openai"

    def __init__(self, config: LLMConfig) -> None:
        self.config = config
        self._client = openai.AsyncOpenAI(
            base_url=config.resolved_base_url(),
            api_key=config.resolved_api_key(),
            max_retries=0,
            timeout=config.timeout_s,
        )
        # Set when the server refused `n` > 1 (llama-server): one choice per request from then on.
        self._one_choice = False

    def _response_format(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        style = self.config.structured
        if style == "json_object_schema":
            return {"type": "json_object", "schema": schema}
        if style == "json_schema":
            inner = {"name": "answer", "schema": schema, "strict": True}
            return {"type": "json_schema", "json_schema": inner}
        return None

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.message_dicts(),
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
            "stream": False,
            "timeout": timeout_s,
        }
        if request.n > 1 and not self._one_choice:
            kwargs["n"] = request.n
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if request.schema is not None:
            fmt = self._response_format(request.schema)
            if fmt is not None:
                kwargs["response_format"] = fmt
        if request.extra:
            kwargs["extra_body"] = dict(request.extra)
        try:
            # wait_for is the hard stop: the HTTP timeout alone does not bound connection set-up retries.
            resp = await asyncio.wait_for(self._client.chat.completions.create(**kwargs), timeout_s + 0.5)
        except (TimeoutError, openai.APITimeoutError) as exc:
            url = self.config.resolved_base_url()
            raise LLMTimeout(f"no answer from {url} within {timeout_s:.1f}s") from exc
        except openai.APIStatusError as exc:
            if "n" in kwargs and ONE_CHOICE in str(exc):
                self._one_choice = True
                return await self.complete(request, timeout_s)
            raise LLMUnavailable(f"HTTP {exc.status_code} from the server: {str(exc)[:300]}") from exc
        except openai.APIError as exc:
            raise LLMUnavailable(f"server unreachable or bad reply: {exc}") from exc
        texts = [(c.message.content or "") if c.message else "" for c in (resp.choices or [])]
        usage = resp.usage
        return BackendReply(
            texts=texts,
            prompt_tokens=int(usage.prompt_tokens or 0) if usage else 0,
            completion_tokens=int(usage.completion_tokens or 0) if usage else 0,
        )

    async def aclose(self) -> None:
        await self._client.close()
