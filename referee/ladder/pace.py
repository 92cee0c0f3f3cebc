"""The ladder's pace: how often a pairing (two accounts, one game) and an account may play.

`paced(matches, pace, now)` takes every match the ladder has scheduled or counted, as
(game, accounts of its seats, scheduled at), and returns the pairings that reached the ladder
file's cap (`[pace] per_pairing_per_hour` in the last hour, or `per_pairing` in all), each with
its count and when it may play again (None: never, the total is reached). The scheduler skips those
pairings; the page lists them. Pairings are of accounts, not entries, so a bot that changes
options does not reset its pace; two seats of one account are never paired (`same_account`).

`AccountRate` is a token bucket per account (`per_account_per_minute`, burst 1 match).

Limits: the hour is a sliding window over the times matches were scheduled (a result stored by
an older ladder has none and counts only towards the total); the counts are rebuilt from every
result each round, fine for thousands of matches.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from referee.ladder.config import PaceConfig

HOUR_S = 3600.0

PairKey = tuple[str, str, str]  # (game, account, account), the accounts sorted


def pair_key(game: str, a: str, b: str) -> PairKey:
    return (game, a, b) if a <= b else (game, b, a)


@dataclass(frozen=True, slots=True)
class Paced:
    """A pairing at its cap: its matches in the last hour and in all, and when it may play again."""

    game: str
    accounts: tuple[str, str]
    last_hour: int
    total: int
    until: float | None


def paced(
    matches: Iterable[tuple[str, list[str], float]], pace: PaceConfig, now: float
) -> dict[PairKey, Paced]:
    """The pairings at their cap among `matches` (game, seats' accounts, scheduled at)."""
    if not pace.per_pairing_per_hour and not pace.per_pairing:
        return {}
    total: dict[PairKey, int] = defaultdict(int)
    recent: dict[PairKey, list[float]] = defaultdict(list)
    for game, accounts, at in matches:
        unique = sorted(set(accounts))
        for i, a in enumerate(unique):
            for b in unique[i + 1 :]:
                key = pair_key(game, a, b)
                total[key] += 1
                if at > now - HOUR_S:
                    recent[key].append(at)
    out = {}
    for key, n in total.items():
        times = sorted(recent.get(key, []))
        until: float | None
        if pace.per_pairing and n >= pace.per_pairing:
            until = None
        elif pace.per_pairing_per_hour and len(times) >= pace.per_pairing_per_hour:
            # Free again when enough of the hour's matches have aged out of the window.
            until = times[len(times) - pace.per_pairing_per_hour] + HOUR_S
        else:
            continue
        out[key] = Paced(key[0], (key[1], key[2]), len(times), n, until)
    return out


class AccountRate:
    """A token bucket per account: `per_minute` matches started, at most one at once (0: no cap)."""

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self._tokens: dict[str, tuple[float, float]] = {}  # account -> (tokens, at)

    def available(self, account: str, now: float) -> int:
        if self.rate <= 0:
            return 1 << 30
        tokens, at = self._tokens.get(account, (1.0, now))
        tokens = min(1.0, tokens + max(0.0, now - at) * self.rate)  # a clock stepping back adds none
        self._tokens[account] = (tokens, now)
        return int(tokens)

    def take(self, account: str, now: float) -> None:
        if self.rate > 0:
            tokens, _ = self._tokens.get(account, (1.0, now))
            self._tokens[account] = (tokens - 1.0, now)
