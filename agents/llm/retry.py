"""How a failed request is classified and retried: HTTP status to class, the wait a provider asks
for, and exponential backoff with jitter.

- Status: 408, 409, 429 and 5xx are the provider's (`provider`, retried); any other 4xx is the
  request's (`config`, never retried), except a 400 that names a content filter (`filtered`).
- Waits: `retry-after-ms` (OpenAI, Azure) is preferred to `Retry-After` (seconds, or an HTTP date);
  without either, the n-th retry waits a uniform random time in [0, min(cap, base * 2**n)] ("full
  jitter"), so that agents which failed together do not retry together.
- The refused parameter: the OpenAI error body's `param`, else the first known request field the
  message names (`response_format`, `seed`, `n`, `max_tokens`, `temperature`, ...).
"""

from __future__ import annotations

import email.utils
import json
import math
import random
import re
import time
from collections.abc import Mapping
from typing import Any

from agents.llm.base import Outcome

PROVIDER_STATUSES = frozenset({408, 409, 429})
KNOWN_PARAMS = (
    "response_format",
    "max_completion_tokens",
    "max_tokens",
    "temperature",
    "top_p",
    "seed",
    "reasoning_effort",
    "think",
    "n",
    "model",
    "messages",
)
_FILTER_WORDS = re.compile(r"content[ _-]?(filter|management|policy)|safety system|responsible ?ai", re.I)


def status_outcome(status: int, body: str = "") -> Outcome:
    """The class of an HTTP error status (with its body, for a 400 that names a content filter)."""
    if status in PROVIDER_STATUSES or status >= 500:
        return "provider"
    if status == 400 and _FILTER_WORDS.search(body):
        return "filtered"
    return "config"


def refused_param(body: Any) -> str | None:
    """The request parameter an error body names, if any."""
    if isinstance(body, (bytes, str)):
        text = body.decode(errors="replace") if isinstance(body, bytes) else body
        try:
            body = json.loads(text)
        except ValueError:
            body = text
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            param = err.get("param")
            if isinstance(param, str) and param:
                return param
            body = str(err.get("message") or err)
        else:
            body = str(err)
    text = str(body)
    for name in KNOWN_PARAMS:
        if re.search(rf"(?<![\w.]){re.escape(name)}(?![\w])", text):
            return name
    return None


def names_n(body: str) -> bool:
    """A 400 that refuses `n` (llama-server: "Only one completion choice is allowed")."""
    return "only one completion choice" in body.lower() or refused_param(body) == "n"


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds the provider asked to wait, or None. Unparseable or negative values are ignored."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            value = float(ms) / 1000
            if math.isfinite(value) and value >= 0:
                return value
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
        return value if math.isfinite(value) and value >= 0 else None
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def backoff(retry: int, base_s: float, cap_s: float, rng: random.Random) -> float:
    """The wait before retry number `retry` (0 for the first) when the provider named none."""
    return rng.uniform(0.0, min(cap_s, base_s * 2**retry))
