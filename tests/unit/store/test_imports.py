"""Importing the store (and its contract suite and CLI module) stays light: no torch, no click in the store;
the store's modules import each other without a circle (the facade composes the parts below it)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import amago_pipe.store


def _modules_after(statement: str) -> set[str]:
    code = f"import sys; {statement}; print(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return set(out.split())


def test_store_and_contract_suite_import_neither_torch_nor_click_nor_pytest() -> None:
    loaded = _modules_after("import amago_pipe.store, amago_pipe.testing.store_contract")
    assert "amago_pipe.store.zarr_store" in loaded
    assert not {"torch", "click", "pytest"} & loaded


def test_cli_module_defers_the_store() -> None:
    loaded = _modules_after("import amago_pipe.cli.store_cmds")
    assert not {"torch", "zarr", "amago_pipe.store"} & loaded


def _store_imports() -> dict[str, set[str]]:
    """Module -> the store modules it imports (at any level, TYPE_CHECKING blocks included)."""
    package = Path(amago_pipe.store.__file__).parent
    graph: dict[str, set[str]] = {}
    for path in package.glob("*.py"):
        module = "amago_pipe.store" if path.stem == "__init__" else f"amago_pipe.store.{path.stem}"
        graph[module] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            graph[module] |= {n for n in names if n.startswith("amago_pipe.store.") and n.count(".") == 2}
    return graph


def test_the_store_modules_import_each_other_without_a_circle() -> None:
    graph = _store_imports()
    assert "amago_pipe.store.zarr_store" in graph["amago_pipe.store.tools"]
    state: dict[str, str] = {}

    def visit(module: str, path: list[str]) -> None:
        state[module] = "open"
        for dep in sorted(graph.get(module, ())):
            assert state.get(dep) != "open", f"import circle: {' -> '.join([*path, module, dep])}"
            if dep not in state:
                visit(dep, [*path, module])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [])
