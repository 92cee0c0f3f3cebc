"""llama-cpp-python's server with a multi-state prompt cache that counts what it keeps (issue 32).

`python -m agents.llm.llama_cpp_serve ARGS` runs `python -m llama_cpp.server ARGS` (same arguments,
same app) with `LeanRAMCache` in place of `llama_cpp.LlamaRAMCache`. `EmbeddedServer` starts it with
`--cache True --cache_type ram --cache_size BYTES --logits_all False`; ARGS must say
`--logits_all False` (see below), else it exits with status 2.

Why a cache at all: the server's own prefix reuse is the previous request only, so concurrent
matches, whose prompts interleave, evict each other. With `Llama.set_cache`, llama-cpp-python 0.3.16
saves the model's state after every completion (keyed by its prompt and completion tokens) and,
before the next one, restores the saved state sharing the longest token prefix with the new prompt
when that is longer than what is already evaluated (`Llama._create_completion`); so each match finds
its own previous turn again. Saved states are dropped least recently used first once their size
passes `--cache_size`.

Why not `LlamaRAMCache` as it is: each saved `LlamaState` also holds a copy of the `scores` array,
one row of vocabulary logits per prompt token (196 KB a token for SmolLM2's 49,152-token vocabulary:
about 40 MB for a 200-token prompt), which the size limit does not count. Measured with the
server's defaults: 45-55 MB of resident memory per saved state against the 5 MB the limit counted.
Those rows are read only for logprobs, which need `logits_all`; the server turns it on by default,
which also computes the vocabulary logits of every prompt token. Spielbus never asks for logprobs,
so the embedded server runs with `--logits_all False` (sampling reads the context's logits of the
last token, as before), and `LeanRAMCache` keeps one unread row of `scores` (what `load_state`
broadcasts back) and counts every byte it keeps against the limit; `Llama.save_state` is made to
see one row, so the rows are not even copied.

Limits: no logprobs (llama-cpp-python refuses such a request without `logits_all`). Tied to
llama-cpp-python 0.3.16's `LlamaState`, `load_state` and server module (pinned in pyproject.toml).
The lookup compares the new prompt with every saved key in Python (microseconds per saved state).
Measured with 30 distinct 200-token prompts and a 32 MB limit: resident memory rose from 235 MB to
a plateau of 310 MB (the states, and about 40 MB allocated once by the first requests); without the
one-row `save_state` and `map_large_allocations` it rose to 400 MB (allocator slack).
"""

from __future__ import annotations

import contextlib
import ctypes
import sys
from collections.abc import Callable
from typing import Any

import llama_cpp
import llama_cpp.llama
from llama_cpp.llama_cache import LlamaRAMCache


def state_bytes(state: Any) -> int:
    """What a saved state holds: the llama.cpp context state and the arrays the Python side copies."""
    return int(state.llama_state_size) + int(state.scores.nbytes) + int(state.input_ids.nbytes)


class LeanRAMCache(LlamaRAMCache):
    """`LlamaRAMCache` whose states keep one row of `scores` (unread without `logits_all`) and whose
    size counts every byte kept."""

    @property
    def cache_size(self) -> int:
        return sum(state_bytes(s) for s in self.cache_state.values())

    def __setitem__(self, key: Any, value: Any) -> None:
        if len(value.scores) > 1:
            value = llama_cpp.llama.LlamaState(
                input_ids=value.input_ids,
                scores=value.scores[-1:].copy(),
                n_tokens=value.n_tokens,
                llama_state=value.llama_state,
                llama_state_size=value.llama_state_size,
                seed=value.seed,
            )
        super().__setitem__(key, value)


def lean_save_state(llama: Any, save: Callable[[Any], Any]) -> Any:
    """`Llama.save_state` seeing one row of `scores`: it copies `scores[:n_tokens]` (up to `n_batch`
    rows, 100 MB for SmolLM2), which `LeanRAMCache` would drop at once; the transient copies alone
    grew the server by 150 MB over 30 requests."""
    full = llama.scores
    llama.scores = full[:1]
    try:
        return save(llama)
    finally:
        llama.scores = full


def map_large_allocations() -> None:
    """Allocations of 1 MB or more straight from mmap, so that freeing one returns it to the system
    (glibc's `M_MMAP_THRESHOLD`; nothing elsewhere): saved states (5-50 MB each) and their transient
    copies come and go, and glibc's heap kept the holes."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(-3, 1 << 20)  # -3: M_MMAP_THRESHOLD


def main(argv: list[str]) -> int:
    if [a for i, a in enumerate(argv[1:]) if argv[i] == "--logits_all"] != ["False"]:
        print("llama_cpp_serve: needs `--logits_all False` (its cache keeps no logits)", file=sys.stderr)
        return 2
    from llama_cpp.server.__main__ import main as serve

    map_large_allocations()
    # The server builds its cache as `llama_cpp.LlamaRAMCache(capacity_bytes=...)` (server/model.py).
    llama_cpp.LlamaRAMCache = LeanRAMCache  # type: ignore[misc]
    save = llama_cpp.llama.Llama.save_state
    llama_cpp.llama.Llama.save_state = lambda self: lean_save_state(self, save)  # type: ignore[method-assign]
    serve()  # parses sys.argv itself
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
