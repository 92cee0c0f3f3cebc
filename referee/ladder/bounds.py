"""What the ladder shows and exports, bounded by the operator rather than by bots.

A bot that rotates its options makes a new `name@hash` entry each time; each entry was a page row
and four Prometheus series for ever (issue 41). `visible_rows` keeps, of the leaderboard's rows:

1. entries seen in the last `[limits] idle_s` (in the pool, or in a match scheduled then);
2. of those, an account's `entries_per_account` most recently seen (ties: more games first);
3. at most `rows` rows in all, in the board's order (per game, best first).

The live page and the Prometheus series (observability/metrics.py removes the series of entries
that drop out) take these rows; `spielbus ladder standings` still prints every stored result's row.

Limits: the times are the ladder process's (a restarted ladder knows an entry's last match from
its stored results, not when it was last in the pool).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping

from referee.ladder.board import BoardRow
from referee.ladder.config import LimitsConfig


def visible_rows(
    rows: list[BoardRow],
    seen: Mapping[str, float],
    account: Callable[[str], str],
    limits: LimitsConfig,
    now: float,
) -> list[BoardRow]:
    """The rows to show and export (see the module docstring); `seen` is entry -> last seen."""
    recent = [r for r in rows if seen.get(r.entry, 0.0) >= now - limits.idle_s]
    by_account: dict[str, dict[str, tuple[float, int]]] = defaultdict(dict)
    for r in recent:
        last, games = by_account[account(r.entry)].get(r.entry, (0.0, 0))
        by_account[account(r.entry)][r.entry] = (max(last, seen.get(r.entry, 0.0)), games + r.games)
    kept = {
        e
        for entries in by_account.values()
        for e in sorted(entries, key=lambda e: (-entries[e][0], -entries[e][1], e))[
            : limits.entries_per_account
        ]
    }
    return [r for r in recent if r.entry in kept][: limits.rows]
