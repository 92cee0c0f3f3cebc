"""Derive the shipped word lists in `games/data/` from Debian packages.

Run once, as root on Debian/Ubuntu (needs network for apt):

    apt-get update && apt-get install -y wordnet-base scowl
    .venv/bin/python scripts/derive_wordlists.py

Produces (gzipped, one lowercase a-z word a line, sorted, deduplicated):

- `scowl70.txt.gz`: SCOWL english + american words, size levels 10..70 (a
  Scrabble-like list of about 110k words). Words with capitals (proper names),
  apostrophes, hyphens or accents are dropped.
- `wordnet_adj.txt.gz`, `wordnet_noun.txt.gz`, `wordnet_verb.txt.gz`,
  `wordnet_adv.txt.gz`: WordNet 3.0 lemmas of that part of speech (index.<pos>)
  plus the inflected forms of the exception lists (<pos>.exc, e.g. "bigger"),
  single words of at least two letters only.
- `wordnet.txt.gz`: the union of the four WordNet lists (the general lexicon).
- `LICENSE.scowl`, `LICENSE.wordnet`: the sources' copyright notices.

Limits: output depends on the Debian package versions (recorded in NOTICE);
gzip output is made reproducible by a fixed mtime.
"""

from __future__ import annotations

import gzip
import re
import shutil
import subprocess
import sys
from pathlib import Path

SCOWL_DIR = Path("/usr/share/dict/scowl")
WORDNET_DIR = Path("/usr/share/wordnet")
OUT = Path(__file__).resolve().parent.parent / "games" / "data"
LEVELS = (10, 20, 35, 40, 50, 55, 60, 70)
POS = ("adj", "noun", "verb", "adv")
WORD_RE = re.compile(r"^[a-z]+$")


def _write(name: str, words: set[str]) -> None:
    data = "".join(w + "\n" for w in sorted(words)).encode("ascii")
    # mtime=0 keeps the .gz byte-identical across runs (clean diffs).
    with open(OUT / name, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz:
        gz.write(data)
    print(f"{name}: {len(words)} words")


def scowl_words() -> set[str]:
    words: set[str] = set()
    for variety in ("english", "american"):
        for level in LEVELS:
            path = SCOWL_DIR / f"{variety}-words.{level}"
            # SCOWL ships some files in Latin-1; non-ASCII words are dropped anyway.
            for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
                w = line.strip()
                if WORD_RE.match(w):
                    words.add(w)
    return words


def wordnet_words(pos: str) -> set[str]:
    words: set[str] = set()
    for line in (WORDNET_DIR / f"index.{pos}").read_text(encoding="utf-8").splitlines():
        if line.startswith(" "):  # licence header lines start with spaces
            continue
        lemma = line.split(" ", 1)[0]
        if WORD_RE.match(lemma) and len(lemma) >= 2:
            words.add(lemma)
    exc = WORDNET_DIR / f"{pos}.exc"
    if exc.exists():
        for line in exc.read_text(encoding="utf-8").splitlines():
            form = line.split(" ", 1)[0]
            if WORD_RE.match(form) and len(form) >= 2:
                words.add(form)
    return words


def _pkg_version(pkg: str) -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True, text=True, check=True
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main() -> int:
    if not SCOWL_DIR.is_dir() or not WORDNET_DIR.is_dir():
        print("install the sources first: apt-get install -y wordnet-base scowl", file=sys.stderr)
        return 1
    OUT.mkdir(parents=True, exist_ok=True)
    _write("scowl70.txt.gz", scowl_words())
    union: set[str] = set()
    for pos in POS:
        words = wordnet_words(pos)
        union |= words
        _write(f"wordnet_{pos}.txt.gz", words)
    _write("wordnet.txt.gz", union)
    shutil.copyfile("/usr/share/doc/scowl/copyright", OUT / "LICENSE.scowl")
    shutil.copyfile("/usr/share/doc/wordnet-base/copyright", OUT / "LICENSE.wordnet")
    (OUT / "NOTICE").write_text(
        "Word lists in this folder are derived by scripts/derive_wordlists.py from:\n"
        f"- SCOWL (Debian package scowl {_pkg_version('scowl')}), Copyright 2000-2011 Kevin Atkinson"
        " and others; see LICENSE.scowl.\n"
        f"- WordNet 3.0 (Debian package wordnet-base {_pkg_version('wordnet-base')}),"
        " Copyright 2006 Princeton University; see LICENSE.wordnet.\n",
        encoding="utf-8",
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
