"""Exact replay: every LLM request and response of a run, kept content-addressed in its run folder.

Recording (`SPIELBUS_LLM_RECORD=DIR`, set by `spielbus run` to `RUN_DIR/llm` for the agents it
starts): each backend reply is appended to `DIR/<key>.json`, where `key` is the SHA-256 of the
request as the backend receives it (model, messages, sampling options, seed, `n`, output schema,
extras, backend kind and structured-output style; never the server's URL, which changes from run
to run). The file holds the request and every response to it in arrival order; `DIR/index.jsonl`
lists each response once (`key`, its position `i`, the SHA-256 `sha` of the response), in
arrival order, so a damaged or missing file is found by `verify_recording`.

Replay (`SPIELBUS_LLM_REPLAY=DIR`, set by `spielbus replay`): the backend answers from the
recording instead of a server. The k-th identical request of a process gets the k-th recorded
response (the last one again when the recording has fewer); a request not in the recording is
appended to `SPIELBUS_LLM_REPLAY_MISSES` (a JSON-lines file) and fails like an unreachable server,
so the agent falls back and the replay reports the first such request.

Limits: writes from several agent processes are serialized by a lock file (`fcntl`, so POSIX
only). Failed requests are not recorded (the agent saw an error, replay gives the same one only
because the request is missing). Responses are kept as the backend returned them: texts and token
counts, not the raw HTTP body.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from agents.llm.base import Backend, BackendReply, BackendRequest, LLMUnavailable

RECORD_ENV = "SPIELBUS_LLM_RECORD"
REPLAY_ENV = "SPIELBUS_LLM_REPLAY"
MISSES_ENV = "SPIELBUS_LLM_REPLAY_MISSES"
INDEX = "index.jsonl"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_document(req: BackendRequest, backend: str, structured: str) -> dict[str, Any]:
    return {
        "backend": backend,
        "structured": structured,
        "model": req.model,
        "messages": [list(m) for m in req.messages],
        "temperature": req.temperature,
        "max_tokens": req.max_tokens,
        "seed": req.seed,
        "top_p": req.top_p,
        "n": req.n,
        "schema": req.schema,
        "extra": req.extra,
    }


def request_key(doc: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(doc)).hexdigest()


def response_document(reply: BackendReply) -> dict[str, Any]:
    return {
        "texts": list(reply.texts),
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
    }


def response_sha(doc: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(doc)).hexdigest()


class RecordingError(Exception):
    """A recording that cannot be replayed: the message names the first missing or damaged response."""


def _reply(doc: Any) -> BackendReply:
    """A stored response as a reply; ValueError when it is not one."""
    if not isinstance(doc, dict):
        raise ValueError("not an object")
    texts, p, c = doc.get("texts"), doc.get("prompt_tokens"), doc.get("completion_tokens")
    if not (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
        raise ValueError("texts is not a list of strings")
    if type(p) is not int or type(c) is not int or p < 0 or c < 0:
        raise ValueError("token counts are not non-negative integers")
    return BackendReply(texts=list(texts), prompt_tokens=p, completion_tokens=c)


def _load(path: Path) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(doc, dict) or not isinstance(doc.get("responses"), list):
        raise ValueError("not a recorded request (no `responses` list)")
    return doc


def verify_recording(folder: str | Path) -> int:
    """Check every response the index lists; returns how many. RecordingError names the first bad one."""
    folder = Path(folder)
    index = folder / INDEX
    try:
        lines = index.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise RecordingError(f"no LLM recording index at {index}: {exc.strerror or exc}") from exc
    docs: dict[str, dict[str, Any]] = {}
    for n, line in enumerate(lines, 1):
        where = f"{index}:{n}"
        try:
            entry = json.loads(line)
            key, i, sha = entry["key"], entry["i"], entry["sha"]
            if not (isinstance(key, str) and len(key) == 64 and type(i) is int and isinstance(sha, str)):
                raise ValueError
        except (ValueError, KeyError, TypeError):
            raise RecordingError(f"{where}: not an index entry") from None
        path = folder / f"{key}.json"
        if key not in docs:
            try:
                docs[key] = _load(path)
            except FileNotFoundError:
                raise RecordingError(f"missing response {key}#{i} ({where}): {path} does not exist") from None
            except (OSError, ValueError) as exc:
                raise RecordingError(
                    f"missing response {key}#{i} ({where}): {path} is damaged: {exc}"
                ) from None
            if request_key(docs[key].get("request") or {}) != key:
                raise RecordingError(f"missing response {key}#{i} ({where}): {path} holds another request")
        responses = docs[key]["responses"]
        if not 0 <= i < len(responses):
            raise RecordingError(f"missing response {key}#{i} ({where}): {path} has {len(responses)}")
        try:
            _reply(responses[i])
        except ValueError as exc:
            raise RecordingError(f"missing response {key}#{i} ({where}): {exc}") from None
        if response_sha(responses[i]) != sha:
            raise RecordingError(f"missing response {key}#{i} ({where}): its content does not match its hash")
    return len(lines)


class RecordingBackend:
    """Wraps a real backend: every reply is also written to the recording folder."""

    def __init__(self, inner: Backend, folder: str | Path, structured: str) -> None:
        self.inner = inner
        self.name = inner.name
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.structured = structured

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        reply = await self.inner.complete(request, timeout_s)
        doc = request_document(request, self.name, self.structured)
        await asyncio.to_thread(self._store, doc, response_document(reply))
        return reply

    def _store(self, request: dict[str, Any], response: dict[str, Any]) -> None:
        key = request_key(request)
        path = self.folder / f"{key}.json"
        with open(self.folder / ".lock", "a") as lock:
            # One writer at a time across every agent process of the run.
            fcntl.flock(lock, fcntl.LOCK_EX)
            doc: dict[str, Any] = {"request": request, "responses": []}
            with contextlib.suppress(FileNotFoundError, ValueError):
                doc = _load(path)
            doc["responses"].append(response)
            tmp = path.with_suffix(f".tmp{os.getpid()}")
            tmp.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
            os.replace(tmp, path)
            entry = {"key": key, "i": len(doc["responses"]) - 1, "sha": response_sha(response)}
            with open(self.folder / INDEX, "a", encoding="utf-8") as index:
                index.write(json.dumps(entry) + "\n")

    async def aclose(self) -> None:
        await self.inner.aclose()


class ReplayBackend:
    """Answers from a recording; no server is asked."""

    def __init__(self, folder: str | Path, name: str, structured: str, misses: str | None = None) -> None:
        self.folder = Path(folder)
        self.name = name
        self.structured = structured
        self.misses = Path(misses) if misses else None
        self._seen: Counter[str] = Counter()
        self._docs: dict[str, dict[str, Any]] = {}

    async def complete(self, request: BackendRequest, timeout_s: float) -> BackendReply:
        doc = request_document(request, self.name, self.structured)
        key = request_key(doc)
        try:
            rec = self._docs.get(key) or _load(self.folder / f"{key}.json")
            self._docs[key] = rec
            responses = rec["responses"]
            reply = _reply(responses[min(self._seen[key], len(responses) - 1)])
        except (OSError, ValueError, IndexError) as exc:
            self._miss(key, doc, exc)
            raise LLMUnavailable(f"request {key} is not in the recording {self.folder}") from None
        self._seen[key] += 1
        return reply

    def _miss(self, key: str, doc: dict[str, Any], exc: Exception) -> None:
        if self.misses is None:
            return
        last = doc["messages"][-1][1] if doc["messages"] else ""
        line = {"key": key, "model": doc["model"], "last_message": last[:300], "why": str(exc)[:200]}
        with open(self.misses, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")

    async def aclose(self) -> None:
        return None


def wrap_backend(backend_name: str, structured: str, make: Any) -> Backend:
    """The backend this process should use: replayed, recorded, or `make()` as it is (see env vars)."""
    replay = os.environ.get(REPLAY_ENV)
    if replay:
        return ReplayBackend(replay, backend_name, structured, os.environ.get(MISSES_ENV))
    inner: Backend = make()
    record = os.environ.get(RECORD_ENV)
    if record:
        return RecordingBackend(inner, record, structured)
    return inner
