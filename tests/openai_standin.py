"""A stand-in for an OpenAI-compatible chat server (named as such: it is not a model), for tests that
need a hosted provider's behaviour across real processes: outages and rate limits.

`OpenAIStandIn` serves `POST /v1/chat/completions` (`stream: false`) with aiohttp. Its answer is a
function of the request's messages only: when the request constrains the answer to an action enum
(`response_format` as `json_object` with `schema`, or `json_schema`), it answers
`{"action": <one of the enum>}` chosen by the SHA-256 of the messages, else a fixed sentence; so two
runs that ask the same prompts get the same answers, whatever the timing. It reports `usage`.

Failures, as hosted providers give them:
- an outage: `outage(after=N, seconds=S)` answers every request from the N-th (counted from 1) on
  with `503` and an HTML body, for S seconds from the first one it refuses; `outage_refused` counts them;
- a limiter: `min_interval_s` refuses a request that comes sooner than that after the last one it
  answered with `429`, `Retry-After` (whole seconds, rounded up) and a JSON error body, and counts
  it in `limited`.
`requests` counts every request, `answered` the 200s, `in_flight_max` the most it served at once.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import time
from typing import Any

from aiohttp import web


def _enum(body: dict[str, Any]) -> list[str] | None:
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return None
    schema = fmt.get("schema")
    if schema is None and isinstance(fmt.get("json_schema"), dict):
        schema = fmt["json_schema"].get("schema")
    if not isinstance(schema, dict):
        return None
    enum = schema.get("properties", {}).get("action", {}).get("enum")
    return [str(e) for e in enum] if isinstance(enum, list) and enum else None


def answer_for(body: dict[str, Any]) -> str:
    """The stand-in's answer to a request: a function of its messages and enum only."""
    messages = json.dumps(body.get("messages", []), sort_keys=True)
    digest = int.from_bytes(hashlib.sha256(messages.encode()).digest()[:8], "big")
    enum = _enum(body)
    if enum is None:
        return "stand-in answer"
    return json.dumps({"action": enum[digest % len(enum)]})


class OpenAIStandIn:
    """See the module docstring. `start()` returns the base URL (ending in `/v1`)."""

    def __init__(self, *, min_interval_s: float = 0.0, delay_s: float = 0.0) -> None:
        self.min_interval_s = min_interval_s
        self.delay_s = delay_s
        self.requests = 0
        self.answered = 0
        self.limited = 0
        self.outage_refused = 0
        self.in_flight = 0
        self.in_flight_max = 0
        self.url = ""
        self._outage_after: int | None = None
        self._outage_s = 0.0
        self._outage_from: float | None = None
        self._last_answer: float | None = None
        self._runner: web.AppRunner | None = None

    def outage(self, after: int, seconds: float) -> None:
        self._outage_after, self._outage_s = after, seconds

    def _down(self) -> bool:
        if self._outage_after is None or self.requests < self._outage_after:
            return False
        now = time.monotonic()
        if self._outage_from is None:
            self._outage_from = now
        return now - self._outage_from < self._outage_s

    @property
    def outage_over(self) -> bool:
        """The outage has started and its time has run out."""
        return self._outage_from is not None and time.monotonic() - self._outage_from >= self._outage_s

    async def _chat(self, request: web.Request) -> web.Response:
        self.requests += 1
        body = await request.json()
        if self._down():
            self.outage_refused += 1
            html = "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
            return web.Response(status=503, text=html, content_type="text/html")
        now = time.monotonic()
        if self.min_interval_s and self._last_answer is not None:
            wait = self._last_answer + self.min_interval_s - now
            if wait > 0:
                self.limited += 1
                return web.json_response(
                    {
                        "error": {
                            "message": "Rate limit reached",
                            "type": "requests",
                            "code": "rate_limit_exceeded",
                        }
                    },
                    status=429,
                    headers={"Retry-After": str(math.ceil(wait))},
                )
        self._last_answer = now
        self.in_flight += 1
        self.in_flight_max = max(self.in_flight_max, self.in_flight)
        try:
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
        finally:
            self.in_flight -= 1
        content = answer_for(body)
        prompt_tokens = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        completion_tokens = max(1, len(content.split()))
        self.answered += 1
        return web.json_response(
            {
                "id": f"chatcmpl-standin-{self.answered}",
                "object": "chat.completion",
                "created": 1_700_000_000,
                "model": body.get("model", "standin"),
                "choices": [
                    {
                        "index": i,
                        "message": {"role": "assistant", "content": content},
                        "finish_reason": "stop",
                    }
                    for i in range(max(1, int(body.get("n") or 1)))
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "standin", "object": "model"}]})

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}/v1"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
