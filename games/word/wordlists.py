"""Word lists for the word games: shipped lists by name, or a user file by path.

Shipped names (derived by `scripts/derive_wordlists.py`, see `games/data/NOTICE`):
`scowl70` (SCOWL levels <= 70, english + american, ~110k words, Scrabble-like),
`wordnet` (every WordNet 3.0 single-word lemma), `wordnet_adj`, `wordnet_noun`,
`wordnet_verb`, `wordnet_adv`.

A user list is a UTF-8 text file (optionally gzipped, `.gz`), one word a line;
blank lines and lines starting with `#` are skipped. Game parameters travel on the
bus (match specs, turns), so a user list is read only from a folder named in the
environment variable `SPIELBUS_WORDS_DIRS` (folders separated by `os.pathsep`; the
resolved file, symlinks followed, must lie inside one), and no list may exceed
`MAX_LIST_BYTES` (file or decompressed): anything else is a `WordListError`. Words are lowercased and
every word that is not made only of the letters a-z is dropped, because the
games' alphabet is a-z.

Lists are cached per process by (name or resolved path); a file edited after
it was first loaded is not reloaded (limit: restart to pick up changes).
"""

from __future__ import annotations

import functools
import gzip
import os
import re
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data"
SHIPPED: dict[str, str] = {
    "scowl70": "scowl70.txt.gz",
    "wordnet": "wordnet.txt.gz",
    "wordnet_adj": "wordnet_adj.txt.gz",
    "wordnet_noun": "wordnet_noun.txt.gz",
    "wordnet_verb": "wordnet_verb.txt.gz",
    "wordnet_adv": "wordnet_adv.txt.gz",
}
_WORD_RE = re.compile(r"^[a-z]+$")
WORDS_DIRS_ENV = "SPIELBUS_WORDS_DIRS"
MAX_LIST_BYTES = 32 * 1024 * 1024  # the largest shipped list is under 2 MiB decompressed


class WordListError(ValueError):
    pass


def allowed_dirs() -> list[Path]:
    raw = os.environ.get(WORDS_DIRS_ENV, "")
    return [Path(d).expanduser().resolve() for d in raw.split(os.pathsep) if d.strip()]


def _resolve(name_or_path: str) -> Path:
    if name_or_path in SHIPPED:
        return DATA_DIR / SHIPPED[name_or_path]
    known = ", ".join(sorted(SHIPPED))
    dirs = allowed_dirs()
    if not dirs:
        raise WordListError(
            f"word list {name_or_path!r} is not a shipped list ({known}); a file of your own must be "
            f"in a folder named in ${WORDS_DIRS_ENV}, which is not set"
        )
    path = Path(name_or_path).expanduser().resolve()
    if not any(path.is_relative_to(d) for d in dirs):
        raise WordListError(
            f"word list {name_or_path!r} is not a shipped list ({known}) and not inside a folder of "
            f"${WORDS_DIRS_ENV} ({os.pathsep.join(str(d) for d in dirs)})"
        )
    if not path.is_file():
        raise WordListError(f"word list {name_or_path!r} is not a file")
    return path


@functools.lru_cache(maxsize=32)
def _load(path: Path) -> tuple[str, ...]:
    if path.stat().st_size > MAX_LIST_BYTES:
        raise WordListError(f"word list {path} is larger than {MAX_LIST_BYTES} bytes")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            raw = fh.read(MAX_LIST_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise WordListError(f"cannot read word list {path}: {exc}") from exc
    if len(raw) > MAX_LIST_BYTES:
        raise WordListError(f"word list {path} decompresses to more than {MAX_LIST_BYTES} bytes")
    words: set[str] = set()
    for line in raw.decode("utf-8", errors="replace").splitlines():
        w = line.strip().lower()
        if w and not w.startswith("#") and _WORD_RE.match(w):
            words.add(w)
    if not words:
        raise WordListError(f"word list {path} has no a-z words")
    return tuple(sorted(words))


def load_words(name_or_path: str) -> tuple[str, ...]:
    """All words of the list, sorted, lowercase a-z, deduplicated."""
    return _load(_resolve(name_or_path))


@functools.lru_cache(maxsize=64)
def words_at_least(name_or_path: str, min_len: int) -> tuple[str, ...]:
    """The sorted words of the list with at least `min_len` letters."""
    return tuple(w for w in load_words(name_or_path) if len(w) >= min_len)


@functools.lru_cache(maxsize=64)
def word_set(name_or_path: str, min_len: int = 1) -> frozenset[str]:
    return frozenset(words_at_least(name_or_path, min_len))


@functools.lru_cache(maxsize=64)
def prefix_set(name_or_path: str, min_len: int = 1) -> frozenset[str]:
    """Every prefix (empty and whole word included) of the words with at least `min_len` letters."""
    out: set[str] = set()
    for w in words_at_least(name_or_path, min_len):
        for i in range(len(w) + 1):
            out.add(w[:i])
    return frozenset(out)


@functools.lru_cache(maxsize=64)
def joined(name_or_path: str, min_len: int = 1) -> str:
    """The words joined by newlines (with a leading and trailing newline) for fast substring scans."""
    return "\n" + "\n".join(words_at_least(name_or_path, min_len)) + "\n"


def has_substring_word(name_or_path: str, min_len: int, s: str) -> bool:
    """True if some word of at least `min_len` letters contains `s` (s has no newline)."""
    return s in joined(name_or_path, min_len)


def find_word_containing(name_or_path: str, min_len: int, s: str) -> str | None:
    """A word containing `s` (the first in list order), or None."""
    text = joined(name_or_path, min_len)
    i = text.find(s)
    if i < 0:
        return None
    start = text.rfind("\n", 0, i) + 1
    return text[start : text.index("\n", i)]
