"""Our modules and what each imports, read from the source with `ast` (lazy imports included),
for the architecture tests (test_import_cycles.py, test_test_map.py).

Limit: imports by string (`importlib.import_module("...")`) are not seen; `from pkg import name`
counts as importing `pkg.name` when that is a module of ours, else `pkg`."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bus", "games", "referee", "agents", "analysis", "observability", "spielbus", "research")


def modules() -> dict[str, Path]:
    """Every module of ours by dotted name (a package by its own name), with its file."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            out[name.removesuffix(".__init__")] = path
    return out


def has_code(path: Path) -> bool:
    """More than a docstring (an empty `__init__.py` or one that only documents its package has none)."""
    body = ast.parse(path.read_text(encoding="utf-8"), str(path)).body
    return bool(body) and not (len(body) == 1 and isinstance(body[0], ast.Expr))


def imports_of(path: Path, mods: dict[str, Path]) -> set[str]:
    """The modules of `mods` that the file at `path` imports, anywhere in it."""

    def ours(name: str) -> str:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name

    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found |= {ours(a.name) for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found |= {ours(f"{node.module}.{a.name}") for a in node.names}
    return found - {""}
