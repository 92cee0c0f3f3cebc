"""The `openai` backend: the official `openai` AsyncClient against any OpenAI-compatible server.

Every reply is classified here (agents/llm/base.py): HTTP errors by status (agents/llm/retry.py),
with the wait the provider asked for; a 200 is read from its raw body, so one that is not a
completion (HTML, cut-off JSON, an `error` object, no `choices`) is a `provider` failure, never an
`AttributeError` or `JSONDecodeError` out of the layer. Thinking is split from each answer
(`reasoning_content`, `reasoning`, inline `<think>`: agents/llm/reasoning.py); tokens are read with
`completion_tokens_details.reasoning_tokens`, `prompt_tokens_details.cached_tokens` and
`total_tokens` where reported, and a reply without `usage` is marked so (the client estimates).

Limits: llama-cpp-python's server ignores `n` (one choice per request; the client then
asks again) and llama.cpp's llama-server refuses it: any 400 that names `n` makes the backend stop
sending `n` to that server and return one choice, so the client asks again the same way. llama.cpp
accepts a JSON schema as `{"type": "json_object", "schema": …}`; vLLM and OpenAI want
`{"type": "json_schema", …}`. See `LLMConfig.structured`. The client's own retries are off: the
LLM layer retries itself, within the turn's deadline.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai

from agents.llm.base import (
    BackendReply,
    BackendRequest,
    LLMConfigError,
    LLMError,
    LLMFiltered,
    LLMTimeout,
    LLMUnavailable,
)
from agents.llm.config import LLMConfig
from agents.llm.reasoning import split_thinking
from agents.llm.retry import names_n, refused_param, retry_after, status_outcome

# llama-server's answer to `n` > 1 (tools/server/utils.hpp).
ONE_CHOICE = "Only one completion choice is allowed"


def http_error(status: int, body: str, headers: Any, where: str) -> LLMError:
    """The classified error of an HTTP error reply."""
    text = f"HTTP {status} from {where}: {body[:300]}"
    outcome = status_outcome(status, body)
    if outcome == "provider":
        return LLMUnavailable(text, status=status, retry_after_s=retry_after(headers))
    if outcome == "filtered":
        return LLMFiltered(text, status=status)
    return LLMConfigError(text, status=status, param=refused_param(body))


def _tokens(value: Any) -> int | None:
    return value if type(value) is int and value >= 0 else None


def _sub(doc: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(doc, dict):
            return None
        doc = doc.get(key)
    return doc


def parse_completion(body: bytes, where: str) -> BackendReply:
    """A chat completion from a 200's raw body; `LLMUnavailable` (status 200) when it is not one."""
    snippet = body[:120].decode(errors="replace")
    try:
        doc = json.loads(body)
    except ValueError:
        raise LLMUnavailable(f"a 200 from {where} that is not JSON: {snippet!r}", status=200) from None
    if not isinstance(doc, dict):
        raise LLMUnavailable(f"a 200 from {where} that is not a completion: {snippet!r}", status=200)
    error = doc.get("error")
    if error is not None and not doc.get("choices"):
        code = _sub(doc, "error", "code")
        status = code if type(code) is int and 400 <= code < 600 else 500
        raise http_error(status, json.dumps(error)[:300], None, where)
    choices = doc.get("choices")
    if not isinstance(choices, list) or not choices:
        raise LLMUnavailable(f"a 200 from {where} with no choices: {snippet!r}", status=200)
    texts: list[str] = []
    thinking: list[str] = []
    reasons: list[str | None] = []
    for choice in choices:
        message = _sub(choice, "message")
        if not isinstance(message, dict):
            raise LLMUnavailable(f"a 200 from {where} whose choice has no message: {snippet!r}", status=200)
        content = message.get("content")
        field = message.get("reasoning_content") or message.get("reasoning")
        answer, thought = split_thinking(
            content if isinstance(content, str) else "", field if isinstance(field, str) else None
        )
        reason = choice.get("finish_reason")
        texts.append(answer)
        thinking.append(thought)
        reasons.append(reason if isinstance(reason, str) else None)
    usage = doc.get("usage")
    prompt = _tokens(_sub(usage, "prompt_tokens"))
    completion = _tokens(_sub(usage, "completion_tokens"))
    known = prompt is not None and completion is not None
    return BackendReply(
        texts=texts,
        prompt_tokens=prompt or 0,
        completion_tokens=completion or 0,
        finish_reasons=tuple(reasons),
        reasoning=tuple(thinking),
        reasoning_tokens=_tokens(_sub(usage, "completion_tokens_details", "reasoning_tokens")),
        total_tokens=_tokens(_sub(usage, "total_tokens")) if known else None,
        cached_tokens=_tokens(_sub(usage, "prompt_tokens_details", "cached_tokens")) or 0,
        usage_known=known,
    )


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

    def body(self, request: BackendRequest) -> dict[str, Any]:
        """The request's fields as the server receives them (None fields are not sent)."""
        kwargs: dict[str, Any] = {
            "model": request.model,
            "messages": request.message_dicts(),
            request.token_param: request.max_tokens,
            "stream": False,
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.n > 1 and not self._one_choice:
            kwargs["n"] = request.n
        if request.seed is not None:
            kwargs["seed"] = request.seed
        if request.top_p is not None:
            kwargs["top_p"] = request.top_p
        if request.reasoning_effort is not None:
            kwargs["reasoning_effort"] = request.reasoning_effort
        if request.schema is not None:
            fmt = self._response_format(request.schema)
            if fmt is not None:
                kwargs["response_format"] = fmt
        return kwargs

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        kwargs = self.body(request)
        kwargs["timeout"] = timeout_s
        if request.extra:
            kwargs["extra_body"] = dict(request.extra)
        where = self.config.resolved_base_url()
        try:
            # wait_for is the hard stop: the HTTP timeout alone does not bound connection set-up retries.
            raw = await asyncio.wait_for(
                self._client.chat.completions.with_raw_response.create(**kwargs), timeout_s + 0.5
            )
            body = raw.http_response.content
        except (TimeoutError, openai.APITimeoutError) as exc:
            raise LLMTimeout(f"no answer from {where} within {timeout_s:.1f}s") from exc
        except openai.APIStatusError as exc:
            text = exc.response.text
            # llama-server refuses `n` > 1 with a 500 (tools/server/utils.hpp), other servers with a 400.
            refuses_n = names_n(text) if exc.status_code == 400 else ONE_CHOICE.lower() in text.lower()
            if "n" in kwargs and refuses_n:
                self._one_choice = True
                return await self.complete(request, timeout_s)
            raise http_error(exc.status_code, text, exc.response.headers, where) from exc
        except openai.APIError as exc:
            raise LLMUnavailable(f"server unreachable or bad reply: {exc}") from exc
        return parse_completion(body, where)

    async def aclose(self) -> None:
        await self._client.close()
