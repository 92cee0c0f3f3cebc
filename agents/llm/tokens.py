"""Token counts for a reply that carried no `usage`: the model's tokenizer where one is at hand,
else about 4 characters a token. Either way the counts are flagged as estimates, with the method
(`tokens_estimated_by` in the call record):

- `tokenizer`: a local tokenizer file, `[llm.NAME] tokenizer = "path/to/tokenizer.json"` (Hugging
  Face's `tokenizers` format; the package must be installed: it comes with `transformers`, the
  `train` extra). Loaded when the configuration is read, so a bad file is a configuration error.
- `server`: the endpoint's own tokenizer, with `tokenizer = "auto"` (the default) on the openai
  backend: llama.cpp's llama-server `POST /tokenize` (`{"content", "add_special": false}` ->
  `{"tokens": [...]}`) or llama-cpp-python's server `POST /extras/tokenize/count` (`{"input"}` ->
  `{"count"}`), both at the server's root (the base URL without `/v1`). llama-server counts the
  end-of-generation token it decoded in its `completion_tokens` (llama-cpp-python's does not), so
  through `/tokenize` a choice that ended with `finish_reason: stop` counts one more. The first reply without
  usage asks which one answers (one short request each); an endpoint with neither (a hosted API:
  404) is not asked again.
- `chars`: `calls.estimate_tokens`, ceil(characters / 4) per text, at least 1 (`tokenizer = "chars"`,
  the ollama backend, a replay of a recording made without a method, or any tokenizer failure).

Limits: the prompt is counted as its messages' texts: the chat template's own tokens (role markers,
a default system prompt) are not, so even a tokenizer's prompt estimate is a few tokens under the
server's count. A completion's estimate equals the server's count where the answer tokenizes as it
was generated (usually; a grammar can make a model emit a rarer split of the same text). A reply's
estimate is recorded with it, so a replay gives the same counts without the endpoint.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import importlib.util
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agents.llm.calls import estimate_tokens

if TYPE_CHECKING:
    from agents.llm.base import BackendReply, BackendRequest

log = logging.getLogger(__name__)

Method = Literal["tokenizer", "server", "chars"]
METHODS: tuple[str, ...] = ("tokenizer", "server", "chars")
# A tokenize request is a few milliseconds on a local server; a hosted API without the route answers
# 404 at once. The turn's clock runs meanwhile, so none waits long.
TOKENIZE_TIMEOUT_S = 3.0
STRICT = ConfigDict(strict=True, extra="ignore")


class _Piece(BaseModel):
    model_config = STRICT
    id: int


class _Tokens(BaseModel):
    """llama-server's `/tokenize` answer (ids, or `{id, piece}` objects with `with_pieces`)."""

    model_config = STRICT
    tokens: list[int | _Piece]


class _Count(BaseModel):
    """llama-cpp-python's `/extras/tokenize/count` answer."""

    model_config = STRICT
    count: int = Field(ge=0)


@functools.lru_cache(maxsize=8)
def load_tokenizer(path: str) -> Any:
    """A `tokenizers.Tokenizer` from a tokenizer.json; ValueError (a configuration error) if it cannot be."""
    if importlib.util.find_spec("tokenizers") is None:
        raise ValueError("needs the `tokenizers` package (pip install tokenizers)")
    if not Path(path).is_file():
        raise ValueError(f"{path} is not a file")
    from tokenizers import Tokenizer

    try:
        return Tokenizer.from_file(path)
    except Exception as exc:  # the library raises its own exception type for every bad file
        raise ValueError(f"{path} is not a tokenizer.json: {exc}") from exc


class TokenCounter:
    """One LLM client's estimator for replies without usage (see the module docstring)."""

    def __init__(self, tokenizer: str, backend: str, base_url: str, api_key: str) -> None:
        """`tokenizer`, `backend`: the `[llm.NAME]` keys; `base_url`, `api_key`: as resolved."""
        self.base_url = base_url
        self.api_key = api_key
        self.local: Any = None
        self.route: str | None = None  # the endpoint's tokenize route, once found
        self.probed = False
        self._lock = asyncio.Lock()
        self._http: httpx.AsyncClient | None = None
        if tokenizer not in ("auto", "chars"):
            self.local = load_tokenizer(tokenizer)
        self.ask_server = tokenizer == "auto" and backend == "openai"

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    async def estimate(self, req: BackendRequest, reply: BackendReply, replay: bool) -> BackendReply:
        """`reply` with estimated counts and their method, when it carried no usage (else unchanged).
        A replay never asks the endpoint: a recorded estimate stays, an older recording's is `chars`."""
        if reply.usage_known or reply.estimated_by is not None:
            return reply
        prompts = [c for _, c in req.messages]
        outs = [*reply.texts, *(r for r in reply.reasoning if r)]
        method: Method = "chars"
        counts: tuple[int, int] | None = None
        if self.local is not None:
            counts, method = (self._local(prompts), self._local(outs)), "tokenizer"
        elif self.ask_server and not replay:
            counts = await self._server(prompts, outs)
            if counts is not None and self.route is not None and self.route.endswith("/tokenize"):
                counts = (counts[0], counts[1] + sum(r == "stop" for r in reply.finish_reasons))
            method = "server"
        if counts is None:
            counts, method = (estimate_tokens(prompts), estimate_tokens(outs)), "chars"
        return dataclasses.replace(
            reply,
            prompt_tokens=counts[0],
            completion_tokens=counts[1],
            total_tokens=None,
            estimated_by=method,
        )

    def _local(self, texts: list[str]) -> int:
        return sum(len(self.local.encode(t, add_special_tokens=False).ids) for t in texts)

    async def _server(self, prompts: list[str], outs: list[str]) -> tuple[int, int] | None:
        """The endpoint's counts of both lists; None when it has no tokenizer or one request failed."""
        async with self._lock:
            if not self.probed:
                self.probed = True
                self.route = await self._find_route()
        if self.route is None:
            return None
        try:
            counted = await asyncio.gather(*(self._count(self.route, t) for t in [*prompts, *outs]))
        except (httpx.HTTPError, ValueError) as exc:
            log.info(
                "tokenize at %s failed (%s): this reply's tokens estimated from characters", self.route, exc
            )
            return None
        return sum(counted[: len(prompts)]), sum(counted[len(prompts) :])

    async def _find_route(self) -> str | None:
        root = self.base_url.rstrip("/").removesuffix("/v1")
        for route in (f"{root}/tokenize", f"{root}/extras/tokenize/count"):
            try:
                await self._count(route, "a")
            except (httpx.HTTPError, ValueError):
                continue
            log.info("replies without usage: tokens counted by the endpoint's own tokenizer (%s)", route)
            return route
        log.info("the endpoint offers no tokenizer: replies without usage estimated from characters")
        return None

    async def _count(self, route: str, text: str) -> int:
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=TOKENIZE_TIMEOUT_S, headers={"Authorization": f"Bearer {self.api_key}"}
            )
        if route.endswith("/count"):
            resp = await self._http.post(route, json={"input": text})
            resp.raise_for_status()
            return _parse(_Count, resp).count
        resp = await self._http.post(route, json={"content": text, "add_special": False})
        resp.raise_for_status()
        return len(_parse(_Tokens, resp).tokens)


def _parse(model: type[Any], resp: httpx.Response) -> Any:
    try:
        return model.model_validate_json(resp.content)
    except ValidationError as exc:
        raise ValueError(f"not a tokenize answer: {exc.errors()[0]['msg']}") from exc
