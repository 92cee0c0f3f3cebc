"""The packages stack in layers and import only downwards (read from the source with `ast`, every
import statement, lazy ones in functions included):

    bus                       the wire: nothing of ours
    games                     bus's protocol models only (`bus.protocol`)
    referee, agents           bus, games (neither imports the other)
    observability             bus, games, referee
    spielbus                  all but research (agent processes still start as `python -m agents`)
    research                  everything; nothing imports it (its commands run as `python -m research.X`)

No exceptions (DESIGN.md's dependency direction; docs/architecture.md). The turn's wire encoding
is the referee's (referee/turns.py): the games give it the seat's views. The human seat's page
lives with its strategy (`agents.human`); the board pictures it shares with the live page are a
view of the games (`games.pictures`), the tiny aiohttp helper both serve with is `bus.http`. So
the referee side never loads agent code, and agents never load the supervisor that runs them.
Limit: imports by string (`importlib.import_module("...")`) are not seen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALLOWED: dict[str, set[str]] = {
    "bus": set(),
    "games": {"bus"},
    "referee": {"bus", "games"},
    "agents": {"bus", "games"},
    "observability": {"bus", "games", "referee"},
    "spielbus": {"bus", "games", "referee", "agents", "observability"},
    "research": {"bus", "games", "referee", "agents", "observability", "spielbus"},
}


def imported(path: Path) -> set[str]:
    """The top-level packages of ours that one module imports."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        out |= {n.split(".")[0] for n in names} & ALLOWED.keys()
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_only_downwards(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    wrong = {
        f"{p.relative_to(ROOT)} imports {sorted(bad)}"
        for p in files
        if (bad := imported(p) - ALLOWED[package] - {package})
    }
    assert not wrong, wrong


# Within an allowed package, the only modules a package may use (none listed: all of them).
ONLY_MODULES: dict[str, dict[str, set[str]]] = {"games": {"bus": {"bus.protocol"}}}


def imported_modules(path: Path) -> set[str]:
    """The dotted modules of ours one module imports (`from a.b import c` counts as `a.b`)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.add(node.module)
    return {m for m in out if m.split(".")[0] in ALLOWED}


@pytest.mark.parametrize("package", sorted(ONLY_MODULES))
def test_only_the_allowed_modules_of_a_lower_package(package: str) -> None:
    """`games` depends on `bus`'s protocol models only: not on connections, subjects or servers."""
    wrong = {
        f"{p.relative_to(ROOT)} imports {m}"
        for p in sorted((ROOT / package).rglob("*.py"))
        for m in imported_modules(p)
        if (only := ONLY_MODULES[package].get(m.split(".")[0])) is not None and m not in only
    }
    assert not wrong, wrong


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from spielbus.run import run\n    import agents.base\n")
    assert imported(module) == {"spielbus", "agents"}


def test_nothing_imports_research() -> None:
    """`research` is the top: no package of ours may name it (tests and benchmarks may)."""
    assert all("research" not in allowed for pkg, allowed in ALLOWED.items() if pkg != "research")


def private_imports(path: Path, ours: set[str]) -> set[str]:
    """`_name`s of another module of ours that one module imports (`from m import _x`) or reaches
    through an imported module (`import m` ... `m._x`). Dunders are not private."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.split(".")[0] not in ours:
                continue
            found |= {f"{node.module}.{a.name}" for a in node.names if private(a.name)}
            aliases |= {a.asname or a.name: f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in ours and a.asname:
                    aliases[a.asname] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in aliases
            and private(node.attr)
        ):
            found.add(f"{aliases[node.value.id]}.{node.attr}")
    return found


def test_no_module_imports_a_private_name_from_another() -> None:
    """A leading underscore means "this module's own": another module that needs it needs a public
    name (the ladder's matchmaking uses referee/bradley_terry.py's `fit`, not the ratings' `_fit`).
    Tests may reach inside."""
    wrong = {
        f"{p.relative_to(ROOT)}: {sorted(names)}"
        for package in ALLOWED
        for p in sorted((ROOT / package).rglob("*.py"))
        if (names := private_imports(p, set(ALLOWED)))
    }
    assert not wrong, wrong


def test_the_private_check_sees_both_forms(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        "from referee.ratings import Pair, _fit\nfrom referee import ratings as r\nimport os\n"
        "x = r._mm, r.bradley_terry, os._exit, Pair.__init__\n"
    )
    assert private_imports(module, set(ALLOWED)) == {"referee.ratings._fit", "referee.ratings._mm"}


def test_the_module_check_sees_a_games_module_reaching_past_the_protocol(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from bus.protocol import Turn\n\ndef f():\n    from bus.subjects import Subjects\n")
    assert imported_modules(module) == {"bus.protocol", "bus.subjects"}
