"""The one interface every LLM agent uses: chat messages in; texts, parsed choices, latency, tokens out.

`LLMClient.chat(messages, choices=…, n=…, …)` returns a `ChatResult`. With
`choices` and `constrain=True` the output is decoded under a JSON schema whose
`action` is an enum of the choices (the backend's structured output); without
it the text is matched against the choices afterwards (`match_choice`), which is
how illegal moves show up. Thinking is split from each answer first
(`agents.llm.reasoning`); only the answer is matched.

Every call goes through the agent's response cache (identical request ->
no new server call, counted as a cache hit) and is counted in the current
decision's `UsageMeter` (see `agents.llm.usage`). A call never outlives its
`deadline` (a `time.monotonic()` instant): the per-request timeout is capped by
it and retries stop when it is spent; `LLMTimeout` is raised then.

Retries (issue 38): a `provider` failure (agents/llm/base.py) is retried up to `retries` times
after the wait the provider asked for (`Retry-After`, `retry-after-ms`) or an exponential backoff
with jitter (agents/llm/retry.py); when that wait does not fit before the deadline the call gives
up at once (recorded as `spent`, so a replay gives up at the same point). `config` and `filtered`
refusals are never retried. A reply cut at the token limit is `truncated`: its text is still
returned and matched (a strategy that finds nothing usable in it falls back, counted as
`fallback_truncated`), and `LLMTruncated` is raised when it was cut before any answer. Each call (all its
attempts) is one `CallRecord` (agents/llm/calls.py): in the decision's meter, and in the call store
(`calls-<tag>.jsonl` of the recording folder) when recording.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agents.llm.base import (
    Backend,
    BackendReply,
    BackendRequest,
    LLMError,
    LLMFiltered,
    LLMTruncated,
    LLMUnavailable,
)
from agents.llm.cache import ResponseCache, SharedCallCancelled, request_key
from agents.llm.calls import CallRecord
from agents.llm.config import LLMConfig
from agents.llm.hooks import record_llm_call, record_llm_cost
from agents.llm.limits import ProviderLimits
from agents.llm.recording import Cancelled, Tape, TimeSpent, request_document
from agents.llm.recording import request_key as recorded_key
from agents.llm.retry import backoff
from agents.llm.tokens import TokenCounter
from agents.llm.usage import UsageMeter, current_meter

Message = tuple[str, str] | dict[str, str]

# Requests shorter than this are not worth sending: the server could not answer in time.
MIN_REQUEST_S = 0.05
FILTERED = "content_filter"
TRUNCATED = "length"


@dataclass
class ChatResult:
    texts: list[str]  # the answers, thinking removed
    choices: list[str | None]  # parsed choice per text (None: none of the choices); [] without choices
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    calls: int  # HTTP requests made for this result (0 when cached)
    cached: bool
    reasoning: list[str] = field(default_factory=list)  # the thinking of each text ("" when none)
    finish_reasons: list[str | None] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.texts[0] if self.texts else ""

    @property
    def choice(self) -> str | None:
        return self.choices[0] if self.choices else None

    @property
    def truncated(self) -> bool:
        return TRUNCATED in self.finish_reasons


@dataclass(frozen=True)
class _Stored:
    texts: tuple[str, ...]
    prompt_tokens: int
    completion_tokens: int
    calls: int
    reasoning: tuple[str, ...] = ()
    finish_reasons: tuple[str | None, ...] = ()


def reply_outcome(reply: BackendReply) -> str:
    """answered / truncated / filtered: every choice filtered is `filtered`; any cut is `truncated`."""
    reasons = reply.finish_reasons
    if reasons and all(r == FILTERED for r in reasons):
        return "filtered"
    if TRUNCATED in reasons:
        return "truncated"
    return "answered"


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


# "Final answer: e4", "Answer: e4", "Move: e4": the text after the last such marker is the answer.
_ANSWER_MARK = re.compile(r"\b(?:final\s+answer|answer|final\s+move|move)\s*(?:is)?\s*[:=]", re.I)


def _json_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice named by the last JSON `"action"` in `text` that names one (the last answer wins)."""
    for m in reversed(list(_JSON_ACTION.finditer(text))):
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
    return None


def match_choice(text: str, choices: Sequence[str]) -> str | None:
    """The choice the text names, or None. `text` is an answer: thinking already removed.

    Order: the last JSON `{"action": …}` that names a choice; the text after the last answer
    marker ("Final answer:", "Answer:", "Move:") when there is one; the whole text equal to a
    choice (case, surrounding quotes and punctuation ignored); else the choice that occurs
    earliest in the text as a whole token (longest on a tie). Prose that names no choice, or an
    empty text, gives None.
    """
    if not text or not choices:
        return None
    found = _json_choice(text, choices)
    if found is not None:
        return found
    marks = list(_ANSWER_MARK.finditer(text))
    if marks:
        after = _prose_choice(text[marks[-1].end() :], choices)
        if after is not None:
            return after
    return _prose_choice(text, choices)


def _prose_choice(text: str, choices: Sequence[str]) -> str | None:
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
    _calls_of_key: Counter[str] = field(init=False, default_factory=Counter)
    limits: ProviderLimits = field(init=False)
    tokens: TokenCounter = field(init=False)

    def __post_init__(self) -> None:
        self.limits = ProviderLimits(self.config)  # the endpoint's shared limits (agents/llm/limits.py)
        # Counts for replies without usage (agents/llm/tokens.py).
        c = self.config
        self.tokens = TokenCounter(c.tokenizer, c.backend, c.resolved_base_url(), c.resolved_api_key())
        if self.backend is None:
            self.backend = make_backend(self.config)
        self.cache = ResponseCache(self.config.cache_size)
        self.tape = Tape.from_env()

    async def aclose(self) -> None:
        await self.tokens.aclose()
        if self.backend is not None:
            await self.backend.aclose()

    def request(
        self,
        messages: Iterable[Message],
        *,
        schema: dict[str, Any] | None = None,
        n: int = 1,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> BackendRequest:
        """The request `chat` sends: options left None come from the config; fields the config
        omits are not sent; the token limit includes the room for thinking."""
        opts = self.config.options
        omit = set(opts.omit)
        return BackendRequest(
            model=self.config.model,
            messages=tuple(_as_pair(m) for m in messages),
            temperature=None
            if "temperature" in omit
            else opts.temperature
            if temperature is None
            else temperature,
            max_tokens=(opts.max_tokens if max_tokens is None else max_tokens) + opts.thinking_room(),
            seed=None if "seed" in omit else opts.seed if seed is None else seed,
            top_p=None if "top_p" in omit else opts.top_p,
            n=max(1, n),
            schema=schema,
            extra=dict(opts.extra),
            token_param=opts.token_param,
            reasoning_effort=opts.reasoning_effort,
            think=opts.think,
        )

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
        """Ask for `n` completions. Raises an `LLMError` (classified: agents/llm/base.py) on failure.

        `schema` constrains the output to any JSON schema; `choices` with
        `constrain` builds the action-enum schema. Options left None come from
        the config.
        """
        if choices is not None and constrain and schema is None:
            schema = choice_schema(choices)
        req = self.request(
            messages, schema=schema, n=n, temperature=temperature, max_tokens=max_tokens, seed=seed
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
        reasons = list(stored.finish_reasons) or [None] * len(texts)
        if texts and all(r == TRUNCATED and not t.strip() for r, t in zip(reasons, texts, strict=True)):
            # Cut while thinking: no answer to parse or re-ask about (a cut answer with text is
            # returned: the strategy parses what is there, and its fallback is counted truncated).
            raise LLMTruncated(f"cut at the token limit ({req.max_tokens}) while thinking, before any answer")
        return ChatResult(
            texts=texts,
            choices=parsed,
            latency_s=time.monotonic() - started,
            prompt_tokens=0 if hit else stored.prompt_tokens,
            completion_tokens=0 if hit else stored.completion_tokens,
            calls=0 if hit else stored.calls,
            cached=hit,
            reasoning=list(stored.reasoning) or [""] * len(texts),
            finish_reasons=reasons,
        )

    async def _fetch(self, req: BackendRequest, deadline: float | None, meter: UsageMeter | None) -> _Stored:
        texts: list[str] = []
        reasoning: list[str] = []
        reasons: list[str | None] = []
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
            completion += reply.charged_completion()
            got = reply.texts[: req.n - i]
            texts.extend(got)
            reasoning.extend((list(reply.reasoning) + [""] * len(got))[: len(got)])
            reasons.extend((list(reply.finish_reasons) + [None] * len(got))[: len(got)])
        return _Stored(tuple(texts), prompt, completion, calls, tuple(reasoning), tuple(reasons))

    async def _keep(self, req: BackendRequest, outcome: BackendReply | LLMError) -> None:
        if self.tape is not None and not self.tape.replay:
            doc = request_document(req, self.config.backend, self.config.structured)
            await asyncio.to_thread(self.tape.record, doc, outcome)

    async def _attempt(self, req: BackendRequest, timeout_s: float, call: CallRecord) -> BackendReply:
        """One attempt: the recorded outcome when replaying, else the server's (kept when recording)."""
        if self.tape is not None and self.tape.replay:
            outcome = self.tape.play(request_document(req, self.config.backend, self.config.structured))
            if isinstance(outcome, Cancelled):
                await asyncio.Future()  # the original was cut by the strategy's clock: so is the replay
            if isinstance(outcome, LLMError):
                raise outcome
            return await self.tokens.estimate(req, outcome, replay=True)
        assert self.backend is not None
        slot = await self.limits.acquire(req, timeout_s)  # waits within the turn's time, recorded
        call.waited_s += slot.waited_s
        try:
            reply = await self.backend.complete(req, max(0.01, timeout_s - slot.waited_s))
            # A reply without usage still spends the endpoint's tokens: estimated, and the estimate
            # recorded with it (a replay gives the same counts without the endpoint).
            reply = await self.tokens.estimate(req, reply, replay=False)
            await slot.release(reply.prompt_tokens + reply.charged_completion())
        except LLMError as exc:
            await self._keep(req, exc)
            raise
        except asyncio.CancelledError:
            await asyncio.shield(self._keep(req, Cancelled("cancelled by the strategy's clock")))
            raise
        finally:
            await slot.release()
        await self._keep(req, reply)
        return reply

    def _new_call(self, req: BackendRequest) -> CallRecord:
        key = recorded_key(request_document(req, self.config.backend, self.config.structured))
        k = self._calls_of_key[key]
        self._calls_of_key[key] += 1
        tag = (self.tape.tag if self.tape is not None else "") or "agent"
        return CallRecord(id=f"{tag}/{key[:16]}/{k}", outcome="provider")

    def _settle(self, call: CallRecord, req: BackendRequest, reply: BackendReply) -> None:
        """Fill a call's record from its reply: class, tokens, thinking, answer, cost."""
        call.outcome = reply_outcome(reply)
        call.status = 200
        call.finish_reason = next((r for r in reply.finish_reasons if r), None)
        call.prompt_tokens = reply.prompt_tokens
        call.completion_tokens = reply.charged_completion()
        call.reasoning_tokens = reply.reasoning_tokens
        call.tokens_estimated = not reply.usage_known
        call.tokens_estimated_by = reply.estimated_by
        call.reasoning = "\n\n".join(r for r in reply.reasoning if r)
        call.answer = reply.texts[0] if reply.texts else ""
        price = self.config.price
        if price is not None:
            call.cost_usd = (call.cost_usd or 0.0) + price.cost(
                call.prompt_tokens, reply.cached_tokens, call.completion_tokens, reply.reasoning_tokens or 0
            )

    def _close_call(self, call: CallRecord, req: BackendRequest, meter: UsageMeter | None) -> None:
        if call.attempts == 0:
            return  # nothing was sent (the turn's time was gone): no call, not the provider's doing
        if meter is not None:
            meter.add_outcome(call.outcome, call.summary())
            if call.cost_usd is not None:
                meter.cost_usd += call.cost_usd
                meter.priced = True
        if call.cost_usd:
            record_llm_cost(None, req.model, call.cost_usd)
        if self.tape is not None and not self.tape.replay:
            self.tape.record_call(call.document())

    def _retry_wait(self, call: CallRecord, exc: LLMUnavailable, retry: int) -> float:
        if exc.retry_after_s is not None:
            return exc.retry_after_s
        # Jitter drawn from the call's id: the agents that failed together differ, a replay waits the same.
        jitter = random.Random(f"{call.id}/{retry}")
        return backoff(retry, self.config.backoff_s, self.config.backoff_max_s, jitter)

    async def _call_with_retries(
        self, req: BackendRequest, deadline: float | None, meter: UsageMeter | None
    ) -> BackendReply:
        call = self._new_call(req)
        try:
            reply = await self._retrying(call, req, deadline, meter)
        except LLMError as exc:
            call.outcome = "provider" if isinstance(exc, LLMUnavailable) else str(exc.outcome)
            call.status = exc.status if exc.status is not None else call.status
            call.error = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, LLMFiltered):
                call.finish_reason = call.finish_reason or FILTERED
            self._close_call(call, req, meter)
            raise
        except asyncio.CancelledError:
            call.error = "cancelled by the strategy's clock while waiting for the provider"
            self._close_call(call, req, meter)
            raise
        self._close_call(call, req, meter)
        return reply

    async def _retrying(
        self, call: CallRecord, req: BackendRequest, deadline: float | None, meter: UsageMeter | None
    ) -> BackendReply:
        last: LLMUnavailable | None = None
        replay = self.tape is not None and self.tape.replay
        price = self.config.price
        for attempt in range(self.config.retries + 1):
            timeout = self.config.timeout_s
            if deadline is not None and not replay:
                timeout = min(timeout, deadline - time.monotonic())
                if timeout < MIN_REQUEST_S:
                    spent = TimeSpent("the turn's time budget is spent", status=call.status)
                    await self._keep(req, spent)
                    raise spent from last
            self.requests_sent += 1
            call.attempts += 1
            t0 = time.monotonic()
            try:
                reply = await self._attempt(req, timeout, call)
            except TimeSpent as exc:
                raise exc from last  # replayed: the original run refused to send here
            except LLMUnavailable as exc:
                # A provider failure: transient, so wait as asked (or back off) and try again.
                record_llm_call(None, req.model, time.monotonic() - t0, error=True)
                last = exc
                call.status = exc.status
                if price is not None and price.failed_request:
                    call.cost_usd = (call.cost_usd or 0.0) + price.failed_request
                if meter is not None:
                    meter.failures += 1
                if attempt == self.config.retries:
                    break
                wait = self._retry_wait(call, exc, attempt)
                if deadline is not None and not replay and time.monotonic() + wait + MIN_REQUEST_S > deadline:
                    spent = TimeSpent(
                        f"{exc} (a retry after {wait:.1f}s would not fit the turn's time)",
                        status=exc.status,
                    )
                    await self._keep(req, spent)
                    raise spent from exc
                if not replay:
                    await asyncio.sleep(wait)
                call.waited_s += wait
                continue
            except LLMError:
                # config / filtered: the endpoint will answer the same again; never retried.
                record_llm_call(None, req.model, time.monotonic() - t0, error=True)
                if meter is not None:
                    meter.failures += 1
                raise
            # Prometheus (a no-op unless this process serves agent metrics): latency, tokens per request.
            elapsed = time.monotonic() - t0
            record_llm_call(None, req.model, elapsed, reply.prompt_tokens, reply.charged_completion())
            self._settle(call, req, reply)
            self.replies += 1
            if meter is not None:
                meter.add_call(reply.prompt_tokens, reply.charged_completion())
                if reply.reasoning_tokens is not None:
                    meter.reasoning_tokens += reply.reasoning_tokens
                    meter.reasoning_reported = True
                meter.unknown_usage_calls += 0 if reply.usage_known else 1
            if call.outcome == "filtered":
                raise LLMFiltered("the provider's content filter withheld the answer", status=200)
            return reply
        assert last is not None
        raise last
