"""Stand-ins for LLM servers in tests (named as such: they are not models).

`OllamaStandIn` is an HTTP server speaking Ollama's real chat API
(`POST /api/chat`, `stream: false`, `format` as a JSON schema, token counts in
`prompt_eval_count` / `eval_count`, `message.thinking` and `done_reason`), built on aiohttp, to
test the native `ollama` backend without Ollama. `OpenAIStandIn` is an HTTP server speaking the
OpenAI chat-completions API (`POST /v1/chat/completions`, `GET /v1/models`) as hosted providers
do, failures included: scripted `Scene`s answer with a completion (with `reasoning_content`,
`<think>`, `finish_reason`, usage folded or not, or none), an HTTP error with its headers
(`Retry-After`, `retry-after-ms`) and body (JSON or HTML), a raw 200 body (HTML, cut-off JSON), or a
hang; it can refuse named parameters with a 400 as strict servers do, rate-limit like a real
limiter, answer slowly, and go down for a while (503 with an HTML body) mid-run. Its answers are a
function of the request only (`answer_for` picks a legal move by the SHA-256 of the messages), so
two runs that ask the same prompts get the same answers, whatever the timing.
`ScriptedBackend` is a `Backend` that returns scripted texts, to feed strategies exactly the bad
outputs a test needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

from agents.llm.base import BackendReply, BackendRequest, LLMTimeout, LLMUnavailable

ROOT = Path(__file__).resolve().parents[1]
Reply = str | Callable[[dict[str, Any]], str]


def _default_answer(body: dict[str, Any]) -> str:
    """First enum value of a `{"action": enum}` format, else a fixed sentence."""
    fmt = body.get("format")
    if isinstance(fmt, dict):
        enum = fmt.get("properties", {}).get("action", {}).get("enum")
        if enum:
            return json.dumps({"action": enum[0]})
    return "stand-in answer"


class _Server:
    """One aiohttp server on a free local port, serving one POST route."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None

    async def start(self, path: str, handler: Any, gets: dict[str, Any] | None = None) -> str:
        app = web.Application()
        app.router.add_post(path, handler)
        for route, get in (gets or {}).items():
            app.router.add_get(route, get)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


async def spielbus_run(cfg: Path, run_dir: Path, timeout_s: float = 600) -> tuple[int, str]:
    """`spielbus run cfg` in a subprocess while this test's event loop serves its stand-ins: exit
    code and output."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "spielbus.cli", "run", str(cfg), "--run-dir", str(run_dir),
        "--quiet", "--metrics-port", "off", "--web-port", "off",
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    assert proc.returncode is not None
    return proc.returncode, out.decode(errors="replace")


class OllamaStandIn:
    """An Ollama-API stand-in. Script answers by appending to `replies` (str or fn(body) -> str);
    set `status` to answer with an HTTP error, `delay_s` to answer slowly. `requests` records bodies.
    `thinking` (when the request sets `think`) is sent as `message.thinking`; `done_reason` is
    sent as given; `statuses` (popped first) script HTTP errors one request at a time."""

    def __init__(self) -> None:
        self.replies: list[Reply] = []
        self.statuses: list[int] = []
        self.thinking: str | None = None
        self.done_reason = "stop"
        self.usage = True
        self.requests: list[dict[str, Any]] = []
        self.status = 200
        self.delay_s = 0.0
        self.answered = 0  # responses actually sent (a request still waiting out its delay is not)
        self._stopping = asyncio.Event()
        self.url = ""
        self._server = _Server()

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.delay_s:
            # Interruptible, so that stop() need not wait out a long delay.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self.delay_s)
        self.answered += 1
        status = self.statuses.pop(0) if self.statuses else self.status
        if status != 200:
            return web.json_response({"error": "stand-in failure"}, status=status)
        if body.get("stream", True):
            return web.json_response({"error": "the stand-in serves stream=false only"}, status=400)
        reply = self.replies.pop(0) if self.replies else _default_answer
        content = reply(body) if callable(reply) else reply
        prompt_tokens = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if self.thinking is not None and body.get("think"):
            message["thinking"] = self.thinking
        doc: dict[str, Any] = {
            "model": body.get("model", ""),
            "created_at": "2024-01-01T00:00:00Z",
            "message": message,
            "done": True,
            "done_reason": self.done_reason,
            "total_duration": 1000,
        }
        if self.usage:
            doc["prompt_eval_count"] = prompt_tokens
            doc["eval_count"] = max(1, len(content.split()) + len((self.thinking or "").split()))
        return web.json_response(doc)

    async def start(self) -> str:
        self.url = await self._server.start("/api/chat", self._chat)
        return self.url

    async def stop(self) -> None:
        self._stopping.set()
        await self._server.stop()


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


# --- the OpenAI-compatible stand-in ----------------------------------------------------------


@dataclass
class Scene:
    """One scripted answer of `OpenAIStandIn`.

    kind `answer`: a completion with `content` (None: the first enum value of the request's schema,
    as JSON; a function: its answer to the request body, e.g. `answer_for`), `reasoning` in the
    message field `reasoning_field`, `finish_reason`, and usage: `usage=False` sends none;
    `reasoning_tokens` are reported in `completion_tokens_details`
    and counted in `completion_tokens` (`fold="in"`), or left out of it and only in `total_tokens`
    (`fold="total"`); `choices=0` sends an empty `choices` list.
    kind `status`: HTTP `status` with `body` (str: sent as is, with `content_type`) and `headers`.
    kind `raw`: a 200 with `body` as is. kind `hang`: no answer until the stand-in stops.
    """

    kind: str = "answer"
    content: Reply | None = None
    reasoning: str | None = None
    reasoning_field: str = "reasoning_content"
    finish_reason: str = "stop"
    usage: bool = True
    reasoning_tokens: int | None = None
    fold: str = "in"
    choices: int = 1
    status: int = 200
    body: str = ""
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)


def _enum(body: dict[str, Any]) -> list[str] | None:
    """The action enum a request constrains its answer to (`json_object` + `schema`, or `json_schema`)."""
    fmt = body.get("response_format")
    schema = fmt.get("schema") or fmt.get("json_schema", {}).get("schema") if isinstance(fmt, dict) else None
    enum = schema.get("properties", {}).get("action", {}).get("enum") if isinstance(schema, dict) else None
    return [str(e) for e in enum] if isinstance(enum, list) and enum else None


def _schema_answer(body: dict[str, Any]) -> str:
    enum = _enum(body)
    return json.dumps({"action": enum[0]}) if enum else "stand-in answer"


def answer_for(body: dict[str, Any]) -> str:
    """A move chosen by the SHA-256 of the request's messages among its enum (else a fixed sentence):
    varied over positions, the same for the same prompt."""
    enum = _enum(body)
    if enum is None:
        return "stand-in answer"
    messages = json.dumps(body.get("messages", []), sort_keys=True)
    digest = int.from_bytes(hashlib.sha256(messages.encode()).digest()[:8], "big")
    return json.dumps({"action": enum[digest % len(enum)]})


class OpenAIStandIn:
    """An OpenAI-compatible chat-completions stand-in (see the module docstring).

    `script`: scenes answered in order, then `default` (an answered scene). `refuse`: request
    fields answered with a 400 naming them, as OpenAI does for a reasoning model's `temperature`
    (`n` is refused with llama-server's message). `outage(after=N, seconds=S)`: every request from
    the N-th (counted from 1) on is answered `503` with an HTML body, for S seconds from the first
    one refused (`outage_refused` counts them, `outage_over` says it has ended). `min_interval_s`:
    a limiter allowing one request per interval, answering 429 with `Retry-After` (seconds, rounded
    up) and OpenAI's JSON error to the others (`limited` counts them). `delay_s`: each completion
    is answered that late (`in_flight_max`: the most answered at once).
    `requests` records each body, `times` each arrival (loop time), `answered` the completions sent."""

    def __init__(self, *, min_interval_s: float = 0.0, delay_s: float = 0.0) -> None:
        self.script: list[Scene] = []
        self.default = Scene()
        self.refuse: set[str] = set()
        self.min_interval_s = min_interval_s
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.times: list[float] = []
        self.answered = 0
        self.limited = 0
        self.outage_refused = 0
        self.in_flight = 0
        self.in_flight_max = 0
        self.url = ""
        self._outage_after: int | None = None
        self._outage_s = 0.0
        self._outage_from: float | None = None
        self._last_admitted: float | None = None
        self._stopping = asyncio.Event()
        self._server = _Server()

    def outage(self, after: int, seconds: float) -> None:
        self._outage_after, self._outage_s = after, seconds

    def _down(self) -> bool:
        if self._outage_after is None or len(self.requests) < self._outage_after:
            return False
        now = time.monotonic()
        if self._outage_from is None:
            self._outage_from = now
        return now - self._outage_from < self._outage_s

    @property
    def outage_over(self) -> bool:
        """The outage has started and its time has run out."""
        return self._outage_from is not None and time.monotonic() - self._outage_from >= self._outage_s

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        now = asyncio.get_running_loop().time()
        self.requests.append(body)
        self.times.append(now)
        for name in sorted(self.refuse):
            if name in body:
                if name == "n":
                    message = "Only one completion choice is allowed"
                else:
                    message = f"Unsupported parameter: '{name}' is not supported with this model."
                error = {"message": message, "type": "invalid_request_error", "param": name, "code": None}
                return web.json_response({"error": error}, status=400)
        if self._down():
            self.outage_refused += 1
            html = "<html><body><h1>503 Service Temporarily Unavailable</h1></body></html>"
            return web.Response(status=503, text=html, content_type="text/html")
        if self.min_interval_s:
            if self._last_admitted is not None and now - self._last_admitted < self.min_interval_s:
                self.limited += 1
                wait = self.min_interval_s - (now - self._last_admitted)
                headers = {"Retry-After": str(math.ceil(wait))}
                error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
                return web.json_response({"error": error}, status=429, headers=headers)
            self._last_admitted = now
        scene = self.script.pop(0) if self.script else self.default
        if scene.kind == "hang":
            await self._stopping.wait()
            return web.json_response({}, status=503)
        if scene.kind == "status":
            return web.Response(
                status=scene.status, text=scene.body, content_type=scene.content_type, headers=scene.headers
            )
        if scene.kind == "raw":
            return web.Response(status=200, text=scene.body, content_type=scene.content_type)
        if self.delay_s:
            self.in_flight += 1
            self.in_flight_max = max(self.in_flight_max, self.in_flight)
            try:  # interruptible, so that stop() need not wait out a long delay
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.delay_s)
            finally:
                self.in_flight -= 1
        self.answered += 1
        return web.json_response(self._completion(body, scene))

    def _completion(self, body: dict[str, Any], scene: Scene) -> dict[str, Any]:
        if scene.content is None:
            content = _schema_answer(body)
        else:
            content = scene.content(body) if callable(scene.content) else scene.content
        message: dict[str, Any] = {"role": "assistant", "content": content}
        if scene.reasoning is not None:
            message[scene.reasoning_field] = scene.reasoning
        n = body.get("n", 1) if scene.choices == 1 else scene.choices
        choices = [{"index": i, "message": message, "finish_reason": scene.finish_reason} for i in range(n)]
        doc: dict[str, Any] = {
            "id": "chatcmpl-standin",
            "object": "chat.completion",
            "created": 1700000000,
            "model": body.get("model", ""),
            "choices": choices,
        }
        if scene.usage:
            prompt = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
            answer = max(1, len(content.split())) * max(1, len(choices))
            thought = scene.reasoning_tokens or 0
            completion = answer + thought if scene.fold == "in" else answer
            usage: dict[str, Any] = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + answer + thought,
            }
            if scene.reasoning_tokens is not None and scene.fold == "in":
                usage["completion_tokens_details"] = {"reasoning_tokens": scene.reasoning_tokens}
            doc["usage"] = usage
        return doc

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "standin", "object": "model"}]})

    async def start(self) -> str:
        gets = {"/v1/models": self._models}
        self.url = await self._server.start("/v1/chat/completions", self._chat, gets) + "/v1"
        return self.url

    async def stop(self) -> None:
        self._stopping.set()
        await self._server.stop()
