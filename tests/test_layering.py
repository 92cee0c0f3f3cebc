"""The packages stack in layers and import only downwards (read from the source with `ast`, every
import statement, lazy ones in functions included):

    bus                       the wire: nothing of ours
    games                     bus
    referee, agents           bus, games (neither imports the other)
    analysis                  bus, games (the move-quality references: no player, no referee)
    observability             bus, games, referee
    spielbus                  all but research (agent processes still start as `python -m agents`)
    research                  everything; nothing imports it (its commands run as `python -m research.X`)

No exceptions. The human seat's page lives with its strategy (`agents.human`); the board pictures
it shares with the live page are a view of the games (`games.pictures`), the tiny aiohttp helper
both serve with is `bus.http`. So the referee side never loads agent code, and agents never load
the supervisor that runs them. Limit: imports by string (`importlib.import_module("...")`) are not
seen."""

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
    "analysis": {"bus", "games"},
    "observability": {"bus", "games", "referee"},
    "spielbus": {"bus", "games", "referee", "agents", "analysis", "observability"},
    "research": {"bus", "games", "referee", "agents", "analysis", "observability", "spielbus"},
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


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from spielbus.run import run\n    import agents.base\n")
    assert imported(module) == {"spielbus", "agents"}


def test_nothing_imports_research() -> None:
    """`research` is the top: no package of ours may name it (tests and benchmarks may)."""
    assert all("research" not in allowed for pkg, allowed in ALLOWED.items() if pkg != "research")
