"""The one interface every LLM agent uses: chat messages in; texts, parsed choices, latency, tokens out.

`LLMClient.chat(messages, choices=…, n=…, …)` returns a `ChatResult`. With
`choices` and `constrain=True` the output is decoded under a JSON schema whose
`action` is an enum of the choices (the backend's structured output); without
it the text is matched against the choices afterwards (`match_choice`), which is
how illegal moves show up.

Every call goes through the agent's response cache (identical request ->
no new server call, counted as a cache hit) and is counted in the current
decision's `UsageMeter` (see `agents.llm.usage`). A call never outlives its
`deadline` (a `time.monotonic()` instant): the per-request timeout is capped by
it and retries stop when it is spent; `LLMTimeout` is raised then.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm.base import Backend, BackendReply, BackendRequest, LLMError, LLMUnavailable
from agents.llm.cache import ResponseCache, SharedCallCancelled, request_key
from agents.llm.config import LLMConfig
from agents.llm.hooks import record_llm_call
from agents.llm.recording import Cancelled, Tape, TimeSpent, request_document
from agents.llm.usage import UsageMeter, current_meter

Message = tuple[str, str] | dict[str, str]

# Requests shorter than this are not worth sending: the server could not answer in time.
MIN_REQUEST_S = 0.05


@dataclass
class ChatResult:
    texts: list[str]
    choices: list[str | None]  # parsed choice per text (None: none of the choices); [] without choices
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    calls: int  # HTTP requests made for this result (0 when cached)
    cached: bool

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def choice(self) -> str | None:
        return self.choices[0] if self.choices else None


@dataclass(frozen=True)
class _Stored:
    texts: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int
    calls: int


def choice_schema(choices: Sequence[str]) -> dict[str, Any]:
    """JSON schema of `{"action": <one of choices>}`."""
    return {
        "type": "object",
        "properties": {"action": {"type": "string", "enum": list(dict.fromkeys(choices))}},
        "required": ["action"],
    }


_JSON_ACTION = re.compile(r'"action"\s*:\s*"((?:[^"\\]|\\.)*)"')


def _norm(s: str) -> str:
    return re.sub(r"\s+", " ", s.strip().strip("\"'`.,;:!").strip()).lower()


def match_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice the text names, or None.

    Order: a JSON `{"action": …}` answer; the whole text equal to a choice
    (case, surrounding quotes and punctuation ignored); else the choice that
    occurs earliest in the text as a whole token (longest on a tie). Prose that
    names no choice, or an empty text, gives None.
    """
    if not text or not choices:
        return None
    m = _JSON_ACTION.search(text)
    if m:
        try:
            value = json.loads(f'"{m.group(1)}"')
        except json.JSONDecodeError:
            value = m.group(1)
        for c in choices:
            if c == value:
                return c
        for c in choices:
            if _norm(c) == _norm(value):
                return c
    target = _norm(text)
    for c in choices:
        if _norm(c) == target:
            return c
    best: tuple[int, int, str] | None = None
    low = text.lower()
    for c in choices:
        needle = c.strip().lower()
        if not needle:
            continue
        pat = (r"(?<![\w])" if needle[0].isalnum() else "") + re.escape(needle)
        pat += r"(?![\w])" if needle[-1].isalnum() else ""
        hit = re.search(pat, low)
        if hit:
            key = (hit.start(), -len(needle), c)
            if best is None or key < best:
                best = key
    return best[2] if best else None


def _as_pair(m: Message) -> tuple[str, str]:
    if isinstance(m, tuple):
        return (str(m[0]), str(m[1]))
    return (str(m["role"]), str(m["content"]))


def make_backend(config: LLMConfig) -> Backend:
    if config.backend == "ollama":
        from agents.llm.ollama_backend import OllamaBackend

        return OllamaBackend(config)
    from agents.llm.openai_backend import OpenAIBackend

    return OpenAIBackend(config)


@dataclass
class LLMClient:
    """An agent's handle on its LLM: one backend, one cache, shared by all its decisions.

    Limits: `n` samples are produced by repeated requests when the server returns
    fewer per request (llama.cpp, Ollama); sample i > 0 then uses seed + i so
    that seeded samples differ. Requests are sequential within one `chat` call.
    """

    config: LLMConfig
    backend: Backend | None = None
    cache: ResponseCache[_Stored] = field(init=False)
    # Record or replay every attempt's outcome (agents/llm/recording.py); None: neither.
    tape: Tape | None = field(init=False, default=None)
    requests_sent: int = 0  # HTTP requests attempted
    replies: int = 0  # requests answered (each counted once in some decision's usage.llm_calls)

    def __post_init__(self) -> None:
        if self.backend is None:
            self.backend = make_backend(self.config)
        self.cache = ResponseCache(self.config.cache_size)
        self.tape = Tape.from_env()

    async def aclose(self) -> None:
        if self.backend is not None:
            await self.backend.aclose()

    async def chat(
        self,
        messages: Iterable[Message],
        *,
        choices: Sequence[str] | None = None,
        constrain: bool = True,
        schema: dict[str, Any] | None = None,
        n: int = 1,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
        deadline: float | None = None,
        use_cache: bool | None = None,
        meter: UsageMeter | None = None,
    ) -> ChatResult:
        """Ask for `n` completions. Raises `LLMError` (LLMUnavailable / LLMTimeout) on failure.

        `schema` constrains the output to any JSON schema; `choices` with
        `constrain` builds the action-enum schema. Options left None come from
        the config.
        """
        opts = self.config.options
        if choices is not None and constrain and schema is None:
            schema = choice_schema(choices)
        req = BackendRequest(
            model=self.config.model,
            messages=tuple(_as_pair(m) for m in messages),
            temperature=opts.temperature if temperature is None else temperature,
            max_tokens=opts.max_tokens if max_tokens is None else max_tokens,
            seed=opts.seed if seed is None else seed,
            top_p=opts.top_p,
            n=max(1, n),
            schema=schema,
            extra=dict(opts.extra),
        )
        meter = meter or current_meter()
        started = time.monotonic()
        cache_on = self.config.cache if use_cache is None else use_cache
        if cache_on:
            key = request_key(
                {
                    "backend": self.config.backend,
                    "url": self.config.resolved_base_url(),
                    "structured": self.config.structured,
                    "request": req.__dict__,
                }
            )
            try:
                stored, hit = await self.cache.get_or_call(key, lambda: self._fetch(req, deadline, meter))
            except SharedCallCancelled as exc:
                raise LLMUnavailable(str(exc)) from exc
        else:
            stored, hit = await self._fetch(req, deadline, meter), False
        if hit and meter is not None:
            meter.cache_hits += 1
        texts = list(stored.texts)
        parsed: list[str | None] = [match_choice(t, choices) for t in texts] if choices is not None else []
        return ChatResult(
            texts=texts,
            choices=parsed,
            latency_s=time.monotonic() - started,
            prompt_tokens=0 if hit else stored.prompt_tokens,
            completion_tokens=0 if hit else stored.completion_tokens,
            calls=0 if hit else stored.calls,
            cached=hit,
        )

    async def _fetch(self, req: BackendRequest, deadline: float | None, meter: UsageMeter | None) -> _Stored:
        texts: list[str] = []
        prompt = completion = calls = 0
        while len(texts) < req.n:
            i = len(texts)
            sub = req
            if i > 0:
                seed = None if req.seed is None else req.seed + i
                sub = BackendRequest(**{**req.__dict__, "n": req.n - i, "seed": seed})
            reply = await self._call_with_retries(sub, deadline, meter)
            calls += 1
            prompt += reply.prompt_tokens
            completion += reply.completion_tokens
            if not reply.texts:
                raise LLMUnavailable("the server returned no choices")
            texts.extend(reply.texts[: req.n - i])
        return _Stored(tuple(texts), prompt, completion, calls)

    async def _keep(self, req: BackendRequest, outcome: BackendReply | LLMUnavailable) -> None:
        if self.tape is not None and not self.tape.replay:
            doc = request_document(req, self.config.backend, self.config.structured)
            await asyncio.to_thread(self.tape.record, doc, outcome)

    async def _attempt(self, req: BackendRequest, timeout_s: float) -> BackendReply:
        """One attempt: the recorded outcome when replaying, else the server's (kept when recording)."""
        if self.tape is not None and self.tape.replay:
            outcome = self.tape.play(request_document(req, self.config.backend, self.config.structured))
            if isinstance(outcome, Cancelled):
                await asyncio.Future()  # the original was cut by the strategy's clock: so is the replay
            if isinstance(outcome, LLMUnavailable):
                raise outcome
            return outcome
        assert self.backend is not None
        try:
            reply = await self.backend.complete(req, timeout_s)
        except LLMUnavailable as exc:
            await self._keep(req, exc)
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._keep(req, Cancelled("cancelled by the strategy's clock")))
            raise
        await self._keep(req, reply)
        return reply

    async def _call_with_retries(
        self, req: BackendRequest, deadline: float | None, meter: UsageMeter | None
    ) -> BackendReply:
        last: LLMError | None = None
        replay = self.tape is not None and self.tape.replay
        for _attempt in range(self.config.retries + 1):
            timeout = self.config.timeout_s
            if deadline is not None and not replay:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout < MIN_REQUEST_S:
                    spent = TimeSpent("the turn's time budget is spent")
                    await self._keep(req, spent)
                    raise spent from last
            self.requests_sent += 1
            t0 = time.monotonic()
            try:
                reply = await self._attempt(req, timeout)
            except TimeSpent as exc:
                raise exc from last  # replayed: the original run refused to send here
            except LLMUnavailable as exc:
                record_llm_call(None, req.model, time.monotonic() - t0, error=True)
                last = exc
                if meter is not None:
                    meter.failures += 1
                continue
            # Prometheus (a no-op unless this process serves agent metrics): latency, tokens per request.
            elapsed = time.monotonic() - t0
            record_llm_call(None, req.model, elapsed, reply.prompt_tokens, reply.completion_tokens)
            self.replies += 1
            if meter is not None:
                meter.add_call(reply.prompt_tokens, reply.completion_tokens)
            return reply
        assert last is not None
        raise last
