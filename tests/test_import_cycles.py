"""No two modules of ours import each other, directly or around a ring (lazy imports included).

A ring hides the true order of a package (`games.chess.position` and `games.loader` once imported
each other through function-level imports); test_layering.py checks packages, this checks modules.
Limits: those of tests/source_modules.py (imports by string are not seen)."""

from __future__ import annotations

from pathlib import Path

from tests.source_modules import imports_of, modules


def import_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    return {name: imports_of(path, mods) - {name} for name, path in mods.items()}


def rings(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                ring = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    ring.append(member)
                    if member == node:
                        break
                if len(ring) > 1:
                    found.append(sorted(ring))
    return found


def test_no_module_imports_itself_around_a_ring() -> None:
    assert not rings(import_graph(modules()))


def test_the_check_finds_a_ring_through_lazy_imports() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert rings(graph) == [["a", "b", "c"]]
    assert not rings({"a": {"b"}, "b": set()})
