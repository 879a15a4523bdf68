"""Layering that import-linter cannot see: converters/ is installed as amago_pipe.converters from the top level."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FORBIDDEN = (
    "torch",
    "click",
    "amago_pipe.nets",
    "amago_pipe.agents",
    "amago_pipe.train",
    "amago_pipe.envs",
    "amago_pipe.data",
    "amago_pipe.pipeline",
    "amago_pipe.cli",
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_converters_import_only_lower_layers():
    files = sorted((REPO / "converters").glob("*.py"))
    assert files
    for path in files:
        for module in imported_modules(path):
            bad = [f for f in FORBIDDEN if module == f or module.startswith(f + ".")]
            assert not bad, f"{path.name} imports {module}: converters may use only store, spec, config and errors"
