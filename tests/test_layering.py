"""The packages stack in layers and import only downwards (read from the source with `ast`, every
import statement, lazy ones in functions included):

    bus                       the wire: nothing of ours
    games                     bus
    referee, agents           bus, games (neither imports the other)
    observability             bus, games, referee
    spielbus                  all but agents (it hands agent commands over to `python -m agents`)

Two named exceptions, each a module, not a package: the `human` agent serves the seat page of
`observability.web.seat` (which itself imports only bus, games and the page's own modules, so an
agent still loads no referee code), and spielbus reads and writes the LLM recording format of
`agents.llm.recording` (`spielbus replay` checks a recording before it starts anything).

So the referee side never loads agent code, and agents never load the supervisor that runs
them (the CWM trajectory recorder, which runs a tournament, lives in spielbus/ and runs as its
own process). Limit: imports by string (`importlib.import_module("...")`) are not seen."""

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
    "spielbus": {"bus", "games", "referee", "observability"},
}


# (importing package, imported module) pairs allowed across the layers; see the docstring.
EXCEPTIONS = {("agents", "observability.web.seat"), ("spielbus", "agents.llm.recording")}
# The seat page's modules: what `agents` may load through the exception above.
SEAT_PAGE = ["seat", "seat_page", "clicks", "http", "pictures"]


def imported(path: Path, package: str | None = None) -> set[str]:
    """The top-level packages of ours that one module imports (an allowed exception of `package`'s
    not counted)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        names = [n for n in names if (package, n) not in EXCEPTIONS]
        out |= {n.split(".")[0] for n in names} & ALLOWED.keys()
    return out


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_imports_go_only_downwards(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files
    wrong = {
        f"{p.relative_to(ROOT)} imports {sorted(bad)}"
        for p in files
        if (bad := imported(p, package) - ALLOWED[package] - {package})
    }
    assert not wrong, wrong


def test_the_check_sees_lazy_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("import os\n\ndef f():\n    from spielbus.run import run\n    import agents.base\n")
    assert imported(module) == {"spielbus", "agents"}


@pytest.mark.parametrize("module", SEAT_PAGE)
def test_the_seat_page_loads_no_referee_code(module: str) -> None:
    """What the exception lets an agent load: bus, games and the page's own modules."""
    path = ROOT / "observability" / "web" / f"{module}.py"
    text = path.read_text()
    assert imported(path) <= {"bus", "games", "observability"}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("observability"):
            assert node.module.removeprefix("observability.web.") in SEAT_PAGE, node.module
    for init in ("observability/__init__.py", "observability/web/__init__.py"):
        assert imported(ROOT / init) == set(), init
