"""Where a key is in TOML text, for error messages that name the line (tomllib keeps no positions).

Limits: a best effort read of the text, not a TOML parser: it finds the deepest table header that
matches a prefix of the key path (bare or quoted keys, `[a.b]`, `[a."b.c"]`, `[[a]]`), then the
first line after it that assigns the last key (`key =`, or inside an inline table `{ key =`).
"""

from __future__ import annotations

import re
from typing import Any


def _key(name: str) -> str:
    """A pattern for one key as TOML may write it: bare, "quoted" or 'literal'."""
    e = re.escape(name)
    return rf"(?:{e}|\"{e}\"|'{e}')"


def line_of(text: str, loc: tuple[Any, ...]) -> int | None:
    """Best-effort line number of a key path in TOML text: the last key, after its table header."""
    lines = text.splitlines()
    start: int | None = None
    # Find the deepest table header that matches a prefix of the path.
    str_loc = [str(p) for p in loc if not isinstance(p, int)]
    for depth in range(len(str_loc), 0, -1):
        header = re.compile(r"^\s*\[+\s*" + r"\s*\.\s*".join(map(_key, str_loc[:depth])) + r"\s*\]+")
        start = next((i for i, line in enumerate(lines) if header.match(line)), None)
        if start is not None:
            break
    if str_loc:
        last = _key(str_loc[-1])
        key = re.compile(r"^\s*" + last + r"\s*=|[{,]\s*" + last + r"\s*=")
        for i in range(start or 0, len(lines)):
            if key.search(lines[i]):
                return i + 1
    return None if start is None else start + 1
