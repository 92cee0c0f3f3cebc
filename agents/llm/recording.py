"""Exact replay: every LLM attempt of a run and its outcome, kept content-addressed in its run folder.

Recording (`SPIELBUS_LLM_RECORD=DIR`, set by `spielbus run` to `RUN_DIR/llm` for the agents it
starts, with `SPIELBUS_LLM_TAG=<agent>-<replica>`): each attempt's outcome is appended to
`DIR/<key>.json`, where `key` is the SHA-256 of the request as the backend receives it (model,
messages, sampling options, seed, `n`, output schema, extras, backend kind and structured-output
style; never the server's URL, which changes from run to run). The file holds the request and
every outcome in arrival order, each tagged with its process: a reply (texts, token counts and,
where the server gave them, `finish_reasons`, the thinking `reasoning`, `reasoning_tokens`,
`total_tokens`, `cached_tokens`, `usage_known: false` with the estimated counts and how they were
estimated, `estimated_by`: agents/llm/tokens.py), or the error the attempt ended with, with
its HTTP `status` (`unavailable` with the `retry_after_s` the provider asked for, `timeout`,
`config` with the refused `param`, `filtered`, `spent`: the client did not send, or gave up
before a wait that did not fit, because the turn's time was gone, `cancelled`: the strategy's own
clock cut the attempt). `DIR/calls-<tag>.jsonl` holds one line per call (all its attempts; the
call store's index: `agents/llm/calls.py`), failed calls included, by the ids moves report.
`DIR/index.jsonl` lists each outcome once (`key`, position `i`, SHA-256 `sha` of the outcome), so
`verify_recording` finds a damaged or missing file.

Replay (`SPIELBUS_LLM_REPLAY=DIR`, set by `spielbus replay`): the LLM client takes each attempt's
outcome from the recording instead of a server: the k-th identical attempt of a tagged process
gets that process's k-th outcome (the last one again when there are fewer). Errors come back as
the same errors, so fallbacks and retries happen as they did; a `cancelled` attempt waits until
the strategy's clock cuts it again (the only replayed wait). A request not in the recording is
appended to `SPIELBUS_LLM_REPLAY_MISSES` (JSON lines) and fails like an unreachable server.

The clock: each decision's `Budget.spent` answers (agents/llm/strategy.py) are kept in
`DIR/clock-<tag>.jsonl` by match id and turn, and a replay gives the same answers in the same
order, so a search that stopped at its deadline stops at the same step again.

Limits: writes from several agent processes are serialized by a lock file (`fcntl`, POSIX only).
Outcomes are kept as the backend returned them (texts and token counts), not the raw HTTP body.
The referee's clock is not replayed: a move that arrived after its deadline in the original run
(a `timeout` fault) arrives in time in a replay, and the records differ from that move on. A
strategy that reads the clock other than through `Budget.spent` can ask other questions in a
replay, which then names the first one.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

from agents.llm.base import (
    BackendReply,
    BackendRequest,
    LLMConfigError,
    LLMError,
    LLMFiltered,
    LLMTimeout,
    LLMUnavailable,
)
from agents.llm.tokens import METHODS

RECORD_ENV = "SPIELBUS_LLM_RECORD"
REPLAY_ENV = "SPIELBUS_LLM_REPLAY"
MISSES_ENV = "SPIELBUS_LLM_REPLAY_MISSES"
TAG_ENV = "SPIELBUS_LLM_TAG"
INDEX = "index.jsonl"


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def request_document(req: BackendRequest, backend: str, structured: str) -> dict[str, Any]:
    doc = {
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
    # Only when set, so that a request without them keeps the key it always had.
    if req.token_param != "max_tokens":
        doc["token_param"] = req.token_param
    if req.reasoning_effort is not None:
        doc["reasoning_effort"] = req.reasoning_effort
    if req.think is not None:
        doc["think"] = req.think
    return doc


def request_key(doc: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(doc)).hexdigest()


def response_document(reply: BackendReply) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "texts": list(reply.texts),
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
    }
    # The fields a reasoning model or a hosted provider adds: only when present, so a plain
    # reply is stored as before.
    if any(r is not None for r in reply.finish_reasons):
        doc["finish_reasons"] = list(reply.finish_reasons)
    if any(reply.reasoning):
        doc["reasoning"] = list(reply.reasoning)
    for name in ("reasoning_tokens", "total_tokens"):
        if getattr(reply, name) is not None:
            doc[name] = getattr(reply, name)
    if reply.cached_tokens:
        doc["cached_tokens"] = reply.cached_tokens
    if not reply.usage_known:
        doc["usage_known"] = False
    if reply.estimated_by is not None:
        doc["estimated_by"] = reply.estimated_by
    return doc


def response_sha(doc: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical(doc)).hexdigest()


class RecordingError(Exception):
    """A recording that cannot be replayed: the message names the first missing or damaged response."""


OUTCOME_ERRORS = ("timeout", "unavailable", "spent", "cancelled", "config", "filtered")


class TimeSpent(LLMTimeout):
    """The client refused to send: the turn's time was spent (recorded, so a replay refuses too)."""


class Cancelled(LLMUnavailable):
    """The attempt was cancelled by the strategy's own clock (a replay waits for that clock again)."""


class NotRecorded(LLMError):
    """A replay asked what the recording never asked: the run has diverged. Not the provider's
    failure (that would void and replay the match, waiting, until it is given up): the strategy's
    own fallback plays, so the replay's record differs and `spielbus replay` names where."""


def _count(doc: dict[str, Any], name: str) -> int | None:
    value = doc.get(name)
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError(f"{name} is not a non-negative integer")
    return value


def _error(doc: dict[str, Any]) -> LLMError:
    kind, message, status = doc.get("error"), doc.get("message"), doc.get("status")
    if kind not in OUTCOME_ERRORS or not isinstance(message, str):
        raise ValueError("not a recorded error")
    if status is not None and type(status) is not int:
        raise ValueError("status is not an integer")
    if kind == "config":
        param = doc.get("param")
        return LLMConfigError(message, status=status, param=param if isinstance(param, str) else None)
    if kind == "filtered":
        return LLMFiltered(message, status=status)
    wait = doc.get("retry_after_s")
    if wait is not None and (type(wait) not in (int, float) or wait < 0 or wait != wait):
        raise ValueError("retry_after_s is not a non-negative number")
    errors: dict[str, type[LLMUnavailable]] = {
        "unavailable": LLMUnavailable,
        "timeout": LLMTimeout,
        "spent": TimeSpent,
        "cancelled": Cancelled,
    }
    return errors[str(kind)](message, status=status, retry_after_s=wait)


def _reply(doc: Any) -> BackendReply | LLMError:
    """A stored outcome: the reply, or the error the attempt ended with. ValueError when it is neither."""
    if not isinstance(doc, dict) or not isinstance(doc.get("tag", ""), str):
        raise ValueError("not an object")
    if "error" in doc:
        return _error(doc)
    texts, p, c = doc.get("texts"), _count(doc, "prompt_tokens"), _count(doc, "completion_tokens")
    if not (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
        raise ValueError("texts is not a list of strings")
    if p is None or c is None:
        raise ValueError("token counts are not non-negative integers")
    reasons = doc.get("finish_reasons", [])
    thinking = doc.get("reasoning", [])
    if not (isinstance(reasons, list) and all(r is None or isinstance(r, str) for r in reasons)):
        raise ValueError("finish_reasons is not a list of strings")
    if not (isinstance(thinking, list) and all(isinstance(r, str) for r in thinking)):
        raise ValueError("reasoning is not a list of strings")
    known = doc.get("usage_known", True)
    if type(known) is not bool:
        raise ValueError("usage_known is not a boolean")
    estimated_by = doc.get("estimated_by")
    if estimated_by is not None and estimated_by not in METHODS:
        raise ValueError(f"estimated_by is not one of {', '.join(METHODS)}")
    return BackendReply(
        texts=list(texts),
        prompt_tokens=p,
        completion_tokens=c,
        finish_reasons=tuple(reasons),
        reasoning=tuple(thinking),
        reasoning_tokens=_count(doc, "reasoning_tokens"),
        total_tokens=_count(doc, "total_tokens"),
        cached_tokens=_count(doc, "cached_tokens") or 0,
        usage_known=known,
        estimated_by=estimated_by,
    )


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


class Tape:
    """One process's side of a recording: `record` appends outcomes, `play` serves them back.

    `tag` names the process (agent name and replica, from `spielbus run`) so that two agents
    asking the same question each get their own answers back, in their own order.
    """

    def __init__(self, folder: str | Path, *, replay: bool, tag: str = "", misses: str | None = None) -> None:
        self.folder = Path(folder)
        self.replay = replay
        self.tag = tag
        self.misses = Path(misses) if misses else None
        self._seen: Counter[str] = Counter()
        self._docs: dict[str, list[dict[str, Any]]] = {}
        self._clock: dict[tuple[str, int], list[bool]] | None = None
        if not replay:
            self.folder.mkdir(parents=True, exist_ok=True)

    @classmethod
    def from_env(cls) -> Tape | None:
        tag = os.environ.get(TAG_ENV, "")
        if os.environ.get(REPLAY_ENV):
            return cls(os.environ[REPLAY_ENV], replay=True, tag=tag, misses=os.environ.get(MISSES_ENV))
        if os.environ.get(RECORD_ENV):
            return cls(os.environ[RECORD_ENV], replay=False, tag=tag)
        return None

    def play(self, request: dict[str, Any]) -> BackendReply | LLMError:
        """The recorded outcome of the next identical attempt; `NotRecorded` (raised) when there is none."""
        key = request_key(request)
        try:
            if key not in self._docs:
                doc = _load(self.folder / f"{key}.json")
                self._docs[key] = [
                    r for r in doc["responses"] if isinstance(r, dict) and r.get("tag", "") == self.tag
                ]
            mine = self._docs[key]
            if not mine:
                raise ValueError(f"no response recorded for {self.tag or 'this agent'}")
            outcome = _reply(mine[min(self._seen[key], len(mine) - 1)])
        except (OSError, ValueError) as exc:
            self._miss(key, request, exc)
            raise NotRecorded(f"request {key} is not in the recording {self.folder}") from None
        self._seen[key] += 1
        return outcome

    def record(self, request: dict[str, Any], outcome: BackendReply | LLMError) -> None:
        if isinstance(outcome, BackendReply):
            doc = response_document(outcome)
        else:
            kinds = (
                (TimeSpent, "spent"),
                (Cancelled, "cancelled"),
                (LLMTimeout, "timeout"),
                (LLMConfigError, "config"),
                (LLMFiltered, "filtered"),
            )
            kind = next((k for cls, k in kinds if isinstance(outcome, cls)), "unavailable")
            doc = {"error": kind, "message": str(outcome)}
            if outcome.status is not None:
                doc["status"] = outcome.status
            if isinstance(outcome, LLMUnavailable) and outcome.retry_after_s is not None:
                doc["retry_after_s"] = outcome.retry_after_s
            if isinstance(outcome, LLMConfigError) and outcome.param is not None:
                doc["param"] = outcome.param
        doc["tag"] = self.tag
        self._store(request, doc)

    def record_call(self, call: dict[str, Any]) -> None:
        """Append one call's account (agents/llm/calls.py) to `calls-<tag>.jsonl`: the call store's
        index of calls, failed ones included, by the ids that decisions report."""
        line = json.dumps(call, ensure_ascii=False) + "\n"
        with open(self.folder / f"calls-{self.tag or 'agent'}.jsonl", "a", encoding="utf-8") as f:
            f.write(line)

    def record_clock(self, match_id: str, turn: int, answers: list[bool]) -> None:
        """Keep what a decision's clock checks answered (`clock-<tag>.jsonl`, one line per decision)."""
        if not answers:
            return
        line = json.dumps({"match_id": match_id, "turn": turn, "spent": answers}) + "\n"
        with open(self.folder / f"clock-{self.tag or 'agent'}.jsonl", "a", encoding="utf-8") as f:
            f.write(line)

    def clock(self, match_id: str, turn: int) -> list[bool] | None:
        """In a replay: what the decision's clock checks answered when recorded (None: not recorded)."""
        if self._clock is None:
            self._clock = {}
            path = self.folder / f"clock-{self.tag or 'agent'}.jsonl"
            with contextlib.suppress(OSError):
                for line in path.read_text(encoding="utf-8").splitlines():
                    with contextlib.suppress(ValueError, KeyError, TypeError):
                        doc = json.loads(line)
                        answers = doc["spent"]
                        if isinstance(answers, list) and all(type(a) is bool for a in answers):
                            self._clock[(str(doc["match_id"]), int(doc["turn"]))] = answers
        return self._clock.get((match_id, turn))

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

    def _miss(self, key: str, doc: dict[str, Any], exc: Exception) -> None:
        if self.misses is None:
            return
        last = doc["messages"][-1][1] if doc["messages"] else ""
        line = {
            "key": key,
            "agent": self.tag,
            "model": doc["model"],
            "last_message": last[:300],
            "why": str(exc)[:200],
        }
        with open(self.misses, "a", encoding="utf-8") as f:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
