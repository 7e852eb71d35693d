"""The project checks its own shape: no function over 80 lines, no module over 500 lines.

The layering (import-linter), ruff and mypy run from ``make test`` before pytest; these
two limits have no tool of their own, so they are checked here.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "sparkpoint"
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500


def _modules() -> list[Path]:
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50, f"found only {len(modules)} modules under {PACKAGE}"
    return modules


def test_no_module_over_500_lines():
    long = {
        str(p.relative_to(PACKAGE)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert not long, f"modules over {MAX_MODULE_LINES} lines (split them by concept): {long}"


def test_no_function_over_80_lines():
    long = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                first = min([node.lineno] + [d.lineno for d in node.decorator_list])
                lines = node.end_lineno - first + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = lines
    assert not long, f"functions over {MAX_FUNCTION_LINES} lines: {long}"


def test_no_import_cycle_between_packages_at_any_depth():
    """import-linter's layers cover the top-level packages; this covers sub-packages too
    (``state`` and ``state.hashmap``, ``datastream`` and ``datastream.connectors``, ...)."""
    import grimp

    graph = grimp.build_graph("sparkpoint")

    def package(module: str) -> str:
        return module if graph.find_children(module) or module.count(".") == 1 else module.rsplit(".", 1)[0]

    edges: dict[str, set[str]] = {}
    for module in graph.modules:
        for imported in graph.find_modules_directly_imported_by(module):
            a, b = package(module), package(imported)
            if a != b and "sparkpoint" not in (a, b):
                edges.setdefault(a, set()).add(b)

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            node = todo.pop()
            if node == goal:
                return True
            if node not in seen:
                seen.add(node)
                todo.extend(edges.get(node, ()))
        return False

    assert len(edges) > 10, sorted(edges)
    cycles = sorted((a, b) for a in edges for b in edges[a] if reaches(b, a))
    assert not cycles, f"packages that import each other (directly or through others): {cycles}"
