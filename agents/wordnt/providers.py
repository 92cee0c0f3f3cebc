"""The two ways to compute the Wordn't bot's counts (see agents/wordnt/analysis.py).

- `IndexProvider`: the suffix-array index (fast; what the agent uses).
- `ScanProvider`: a naive scan of the whole word list for every proposal string,
  with the halting cases checked word by word straight from their definitions.
  It is the benchmark's baseline and the tests' independent cross-check.

Limit: an `IndexProvider` keeps the level-1 result of the last `level1` call and
answers `level2` from it, so use one provider per decision (not shared across
threads).
"""

from __future__ import annotations

import numpy as np

from agents.wordnt.index import APPEND, Level, WordntIndex
from games.word.wordnt import CHALLENGE_WORD, apply_letter


class IndexProvider:
    def __init__(self, index: WordntIndex) -> None:
        self.ix = index
        self._l1: tuple[str, int, Level] | None = None

    def is_word(self, s: str) -> bool:
        return s in self.ix.word_set

    def is_live(self, s: str) -> bool:
        return self.ix.occurrences(s).size > 0

    def _level1(self, c: str, n: int) -> Level:
        if self._l1 is not None and self._l1[0] == c and self._l1[1] == n:
            return self._l1[2]
        ix = self.ix
        if c:
            cpos, cact = ix.children(ix.occurrences(c), len(c))
        else:  # the first letter of a round: every letter position, "append x" only
            cpos = np.flatnonzero(ix.wid >= 0)
            cact = ix.tarr[cpos].astype(np.int64) - 97 + APPEND
        lv = ix.level(cpos, cact, c, n)
        self._l1 = (c, n, lv)
        return lv

    def level1(self, c: str, n: int) -> dict[int, tuple[int, int, float]]:
        lv = self._level1(c, n)
        return {
            int(a): (int(b), int(nh), float(avg))
            for a, b, nh, avg in zip(lv.actions, lv.basis, lv.nonhalting, lv.avg_len, strict=True)
        }

    def level2(self, c: str, a: int, n: int) -> dict[int, tuple[int, int, int]]:
        ix = self.ix
        N = ix.n_words
        lv = self._level1(c, n)
        s = apply_letter(c, a)
        occ = lv.cpos[lv.cact == a]
        cpos, cact = ix.children(occ, len(s))
        lv2 = ix.level(cpos, cact, s, n)
        lo, hi = np.searchsorted(lv.nh_keys, [a * N, (a + 1) * N])
        nh_me = lv.nh_keys[lo:hi] - a * N  # sorted word ids
        nh2_ids = lv2.nh_keys % N
        both = np.isin(nh2_ids, nh_me, assume_unique=False)
        inter = np.bincount(lv2.nh_keys[both] // N, minlength=CHALLENGE_WORD)
        return {
            int(x): (int(b), int(nh), int(inter[x]))
            for x, b, nh in zip(lv2.actions, lv2.basis, lv2.nonhalting, strict=True)
        }


class ScanProvider:
    def __init__(self, words: tuple[str, ...]) -> None:
        self.words = words
        self.word_set = frozenset(words)

    def basis(self, s: str) -> list[str]:
        return [w for w in self.words if s in w]

    def halting(self, w: str, s: str, n: int) -> bool:
        """Is basis word w of s a halting basis word for the player who forms s?"""
        k, r = len(s), len(s) % n
        if s in self.word_set or len(w) % n == r:  # s is a word / exact case
            return True
        ws = self.word_set
        if w.startswith(s) and any(w[:t] in ws for t in range(k, len(w)) if t % n == r):
            return True  # prefix case
        return w.endswith(s) and any(w[len(w) - t :] in ws for t in range(k, len(w)) if t % n == r)

    def is_word(self, s: str) -> bool:
        return s in self.word_set

    def is_live(self, s: str) -> bool:
        return any(s in w for w in self.words)

    def _proposals(self, c: str) -> list[int]:
        return list(range(APPEND, CHALLENGE_WORD)) if not c else list(range(CHALLENGE_WORD))

    def level1(self, c: str, n: int) -> dict[int, tuple[int, int, float]]:
        out: dict[int, tuple[int, int, float]] = {}
        for a in self._proposals(c):
            s = apply_letter(c, a)
            b = self.basis(s)
            if b:
                nh = sum(1 for w in b if not self.halting(w, s, n))
                out[a] = (len(b), nh, sum(map(len, b)) / len(b))
        return out

    def level2(self, c: str, a: int, n: int) -> dict[int, tuple[int, int, int]]:
        s = apply_letter(c, a)
        mine = {w for w in self.basis(s) if not self.halting(w, s, n)}
        out: dict[int, tuple[int, int, int]] = {}
        for x in range(CHALLENGE_WORD):
            s2 = apply_letter(s, x)
            b2 = self.basis(s2)
            if b2:
                nh2 = [w for w in b2 if not self.halting(w, s2, n)]
                out[x] = (len(b2), len(nh2), sum(1 for w in nh2 if w in mine))
        return out
