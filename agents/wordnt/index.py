"""The substring index behind the Wordn't bot (the Wordn't paper, "Computational considerations").

Instead of Aho-Corasick we keep a suffix array over the word list joined by
newlines: the occurrences of any string are one binary search away, and the
occurrences of the 52 proposals (and of the next player's proposals) are
derived from the current string's occurrences by looking one letter left or
right, with numpy, without searching again. Per-occurrence flags give the three
halting cases of the seed:

- exact: the word's length is congruent to the string's length mod n;
- prefix: the occurrence starts the word, and the word has a proper prefix that
  is a word, at least as long as the string, of a congruent length;
- suffix: the mirror image.

A string is "formed" by the player whose position is its length mod n, so
"halting for the player who forms s" only needs len(s) and n.

Built once per (word list, min_word_length) and cached per process
(`get_index`); per-n tables are cached inside. Limits: building takes a few
seconds and ~100 MB transiently for a 110k-word list (the suffix array itself
is 4 bytes per letter); strings are a-z.
"""

from __future__ import annotations

import bisect
import functools
import threading
from array import array
from dataclasses import dataclass

import numpy as np

from games.word.wordlists import words_at_least
from games.word.wordnt import apply_letter

NL = 10  # b"\n"
A = 97  # b"a"
APPEND = 26


@dataclass(frozen=True)
class Level:
    """Stats of every child string (one letter added) of a set of occurrences.

    `actions` are the Wordn't action ids of the children that have basis words; the
    arrays are aligned with them. `nh_keys` holds action*N + word id for every
    non-halting basis word of every child (sorted), `cpos`/`cact` the child occurrences.
    """

    actions: np.ndarray  # int64, sorted
    basis: np.ndarray  # int64: number of basis words
    nonhalting: np.ndarray  # int64: number of non-halting basis words
    avg_len: np.ndarray  # float64: average basis word length
    nh_keys: np.ndarray  # int64
    cpos: np.ndarray  # int64: child occurrence start positions
    cact: np.ndarray  # int64: child action of each occurrence


class WordntIndex:
    def __init__(self, words: tuple[str, ...]) -> None:
        self.words = words
        self.n_words = len(words)
        self.word_set = frozenset(words)
        text = "\n" + "\n".join(words) + "\n"
        self.text = text.encode("ascii")
        self.tarr = np.frombuffer(self.text, dtype=np.uint8)
        lens = np.fromiter((len(w) for w in words), dtype=np.int64, count=len(words))
        self.wlen = lens
        starts = np.empty(len(words), dtype=np.int64)
        starts[0] = 1
        starts[1:] = 1 + np.cumsum(lens[:-1] + 1)
        self.wstart = starts
        self.wend = starts + lens  # position of the newline after each word
        wid = np.full(len(self.text), -1, dtype=np.int64)
        for i in range(len(words)):  # ~110k slice assignments: well under a second
            wid[starts[i] : starts[i] + lens[i]] = i
        self.wid = wid
        self._sa: array | None = None
        self._sa_lock = threading.Lock()
        self._tables: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        # Proper prefix / suffix lengths that are themselves words, per word (for the halting cases).
        self.prefix_words: list[tuple[int, ...]] = []
        self.suffix_words: list[tuple[int, ...]] = []
        ws = self.word_set
        for w in words:
            L = len(w)
            self.prefix_words.append(tuple(t for t in range(1, L) if w[:t] in ws))
            self.suffix_words.append(tuple(t for t in range(1, L) if w[L - t :] in ws))
        self.max_len = int(lens.max())

    # --- occurrences -----------------------------------------------------------------------------
    def _suffix_array(self) -> array:
        with self._sa_lock:
            if self._sa is None:
                t = self.text
                ends = self.wend
                wid = self.wid
                pos = np.flatnonzero(wid >= 0)
                # Key: the suffix up to the end of its word; ties are irrelevant for lookups.
                keys = [t[p : ends[wid[p]]] for p in pos.tolist()]
                order = sorted(range(len(keys)), key=keys.__getitem__)
                self._sa = array("q", pos[np.asarray(order, dtype=np.int64)].tolist())
            return self._sa

    def occurrences(self, s: str) -> np.ndarray:
        """Start positions (in the joined text) of every occurrence of non-empty `s`."""
        sa = self._suffix_array()
        b = s.encode("ascii")
        k = len(b)
        t = self.text
        # Keys T[p:p+k] are monotone along the suffix array (a newline sorts before letters).
        lo = bisect.bisect_left(sa, b, key=lambda p: t[p : p + k])
        hi = bisect.bisect_right(sa, b, lo=lo, key=lambda p: t[p : p + k])
        return np.asarray(sa[lo:hi], dtype=np.int64)

    # --- halting tables ----------------------------------------------------------------------------
    def tables(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(word length mod n, PH, SH): PH[k, w] is True when word w has a proper prefix word of
        length l with k <= l and l = k (mod n); SH likewise for suffixes."""
        tab = self._tables.get(n)
        if tab is None:
            rows = self.max_len + 2
            ph = np.zeros((rows, self.n_words), dtype=bool)
            sh = np.zeros((rows, self.n_words), dtype=bool)
            for table, lengths in ((ph, self.prefix_words), (sh, self.suffix_words)):
                for w, ls in enumerate(lengths):
                    for ell in ls:
                        table[ell:0:-n, w] = True  # k = l, l-n, l-2n, ... >= 1
            tab = (self.wlen % n, ph, sh)
            self._tables[n] = tab
        return tab

    # --- one level of proposals --------------------------------------------------------------------
    def children(self, occ: np.ndarray, k: int, allow_prepend: bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Occurrences of the one-letter extensions of a string of length k (given its
        occurrences): child start positions and child action ids."""
        parts_pos: list[np.ndarray] = []
        parts_act: list[np.ndarray] = []
        if allow_prepend:
            pp = occ - 1
            pc = self.tarr[pp]
            m = pc != NL
            parts_pos.append(pp[m])
            parts_act.append(pc[m].astype(np.int64) - A)
        ac = self.tarr[occ + k]
        m = ac != NL
        parts_pos.append(occ[m])
        parts_act.append(ac[m].astype(np.int64) - A + APPEND)
        return np.concatenate(parts_pos), np.concatenate(parts_act)

    def level(self, cpos: np.ndarray, cact: np.ndarray, parent: str, n: int) -> Level:
        """Stats of the children of `parent` (one letter longer) given their occurrences."""
        N = self.n_words
        k = len(parent) + 1
        wmod, ph, sh = self.tables(n)
        ids = self.wid[cpos]
        hal = wmod[ids] == (k % n)
        if k < ph.shape[0]:
            hal |= (cpos == self.wstart[ids]) & ph[k, ids]
            hal |= (cpos + k == self.wend[ids]) & sh[k, ids]
        keys = cact * N + ids
        b_keys = _unique(keys, 52 * N)
        h_keys = _unique(keys[hal], 52 * N)
        nh_keys = np.setdiff1d(b_keys, h_keys, assume_unique=True)
        # A child string that is itself a word loses to "challenge word": all its basis words halt.
        present = np.flatnonzero(np.bincount(cact, minlength=52)).tolist()
        word_acts = [a for a in present if apply_letter(parent, a) in self.word_set]
        if word_acts and nh_keys.size:
            nh_keys = nh_keys[~np.isin(nh_keys // N, word_acts)]
        b_act = b_keys // N
        basis = np.bincount(b_act, minlength=52)
        nonhalting = np.bincount(nh_keys // N, minlength=52)
        len_sum = np.bincount(b_act, weights=self.wlen[b_keys % N], minlength=52)
        actions = np.flatnonzero(basis)
        return Level(
            actions=actions,
            basis=basis[actions],
            nonhalting=nonhalting[actions],
            avg_len=len_sum[actions] / basis[actions],
            nh_keys=nh_keys,
            cpos=cpos,
            cact=cact,
        )


def _unique(keys: np.ndarray, bound: int) -> np.ndarray:
    """Sorted distinct values of `keys` (all in [0, bound)): a flag array when the input is large
    (linear time; the empty string's proposals have ~10^5 occurrences each), else a sort."""
    if keys.size * 16 < bound:
        k = np.sort(keys)
        if k.size:
            k = k[np.concatenate(([True], k[1:] != k[:-1]))]
        return k
    flags = np.zeros(bound, dtype=bool)
    flags[keys] = True
    return np.flatnonzero(flags)


@functools.lru_cache(maxsize=8)
def get_index(words_name: str, min_len: int) -> WordntIndex:
    """The index of a word list (shipped name or path), built once per process."""
    return WordntIndex(words_at_least(words_name, min_len))
