"""tests/README.md maps every module of ours to its tests, and the map stays true."""

from __future__ import annotations

import re
from pathlib import Path

from tests.source_modules import ROOT, has_code, imports_of, modules

TESTS = Path(__file__).resolve().parent
ROW = re.compile(r"^\| `([^`]+)` \|([^|]*)\|([^|]*)\|$", re.M)


def rows() -> dict[str, tuple[list[str], str]]:
    """Module path -> (test files, how they reach it; empty when they import it by name)."""
    text = (TESTS / "README.md").read_text(encoding="utf-8")
    out: dict[str, tuple[list[str], str]] = {}
    for path, tests, how in ROW.findall(text):
        assert path not in out, f"tests/README.md has two rows for {path}"
        out[path] = (re.findall(r"`([^`]+)`", tests), how.strip())
    return out


def test_every_module_with_code_has_a_row() -> None:
    have = set(rows())
    need = {str(p.relative_to(ROOT)) for p in modules().values() if has_code(p)}
    missing = sorted(need - have)
    assert not missing, f"add rows to tests/README.md for: {', '.join(missing)}"


def test_every_row_names_real_modules_and_tests() -> None:
    for path, (tests, _) in rows().items():
        assert (ROOT / path).is_file(), f"tests/README.md names {path}, which does not exist"
        assert tests, f"tests/README.md lists no test for {path}"
        for t in tests:
            assert (TESTS / t).is_file() and t.startswith("test_"), f"{path}: {t} is not a test file"


def test_a_row_without_a_how_lists_tests_that_import_the_module() -> None:
    mods = modules()
    by_path = {str(p.relative_to(ROOT)): name for name, p in mods.items()}
    wrong = [
        f"{path}: {t}"
        for path, (tests, how) in rows().items()
        if not how
        for t in tests
        if by_path[path] not in imports_of(TESTS / t, mods)
    ]
    assert not wrong, f"these tests do not import the module of their row (say how, or fix): {wrong}"
