"""Stand-ins for LLM servers in tests (named as such: they are not models).

`OllamaStandIn` is an HTTP server speaking Ollama's real chat API
(`POST /api/chat`, `stream: false`, `format` as a JSON schema, token counts in
`prompt_eval_count` / `eval_count`), built on aiohttp, to test the native
`ollama` backend without Ollama. `ScriptedBackend` is a `Backend` that returns
scripted texts, to feed strategies exactly the bad outputs a test needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from agents.llm.base import BackendReply, BackendRequest, LLMTimeout, LLMUnavailable

Reply = str | Callable[[dict[str, Any]], str]


def _default_answer(body: dict[str, Any]) -> str:
    """First enum value of a `{"action": enum}` format, else a fixed sentence."""
    fmt = body.get("format")
    if isinstance(fmt, dict):
        enum = fmt.get("properties", {}).get("action", {}).get("enum")
        if enum:
            return json.dumps({"action": enum[0]})
    return "stand-in answer"


class OllamaStandIn:
    """An Ollama-API stand-in. Script answers by appending to `replies` (str or fn(body) -> str);
    set `status` to answer with an HTTP error, `delay_s` to answer slowly. `requests` records bodies."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.delay_s = 0.0
        self.answered = 0  # responses actually sent (a request still waiting out its delay is not)
        self._stopping = asyncio.Event()
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.delay_s:
            # Interruptible, so that stop() need not wait out a long delay.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.delay_s)
        self.answered += 1
        if self.status != 200:
            return web.json_response({"error": "stand-in failure"}, status=self.status)
        if body.get("stream", True):
            return web.json_response({"error": "the stand-in serves stream=false only"}, status=400)
        reply = self.replies.pop(0) if self.replies else _default_answer
        content = reply(body) if callable(reply) else reply
        prompt_tokens = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
        return web.json_response(
            {
                "model": body.get("model", ""),
                "created_at": "2024-01-01T00:00:00Z",
                "message": {"role": "assistant", "content": content},
                "done": True,
                "done_reason": "stop",
                "total_duration": 1000,
                "prompt_eval_count": prompt_tokens,
                "eval_count": max(1, len(content.split())),
            }
        )

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/api/chat", self._chat)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def stop(self) -> None:
        self._stopping.set()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


@dataclass
class ScriptedBackend:
    """A stand-in `Backend`: answers from `script` in order (then `default`); "!down" raises
    LLMUnavailable, "!slow" raises LLMTimeout. Records every request."""

    script: list[str] = field(default_factory=list)
    default: str = ""
    name: str = "scripted"
    requests: list[BackendRequest] = field(default_factory=list)

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        self.requests.append(request)
        text = self.script.pop(0) if self.script else self.default
        if text == "!down":
            raise LLMUnavailable("stand-in: server down")
        if text == "!slow":
            raise LLMTimeout("stand-in: too slow")
        return BackendReply(texts=[text], prompt_tokens=10, completion_tokens=max(1, len(text.split())))

    async def aclose(self) -> None:
        return None
