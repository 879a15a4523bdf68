"""House rules no linter states: file and function size caps, and `torch.load` only with weights_only=True."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TREES = ("amago_pipe", "converters", "tests", "benchmarks")
MAX_FILE_LINES = 800
"""STYLE.md's hard cap (the soft cap is 400)."""
MAX_FUNCTION_LINES = 80


def python_files() -> list[Path]:
    return sorted(p for tree in TREES for p in (REPO / tree).rglob("*.py"))


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def unsafe_torch_loads(source: str) -> list[int]:
    """Lines calling `torch.load` (or `load` imported from torch) without the keyword `weights_only=True`."""
    tree = ast.parse(source)
    aliases = {
        a.asname or a.name
        for n in ast.walk(tree)
        if isinstance(n, ast.ImportFrom) and n.module in ("torch", "torch.serialization")
        for a in n.names
        if a.name == "load"
    }
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        is_load = (isinstance(f, ast.Name) and f.id in aliases) or (
            isinstance(f, ast.Attribute)
            and f.attr == "load"
            and ast.unparse(f.value) in ("torch", "torch.serialization")
        )
        safe = any(
            k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True
            for k in node.keywords
        )
        if is_load and not safe:
            lines.append(node.lineno)
    return lines


def test_files_stay_under_the_hard_cap() -> None:
    files = python_files()
    assert len(files) > 100
    too_long = [
        f"{p.relative_to(REPO)}: {n} lines" for p in files if (n := len(p.read_text().splitlines())) >= MAX_FILE_LINES
    ]
    assert not too_long, f"split these by responsibility (cap {MAX_FILE_LINES} lines): {too_long}"


def test_functions_stay_under_the_cap() -> None:
    too_long = []
    for path in python_files():
        for fn in functions(ast.parse(path.read_text())):
            first = min([fn.lineno, *(d.lineno for d in fn.decorator_list)])
            n = (fn.end_lineno or fn.lineno) - first + 1
            if n >= MAX_FUNCTION_LINES:
                too_long.append(f"{path.relative_to(REPO)}:{fn.lineno} {fn.name}: {n} lines")
    assert not too_long, f"split these (cap {MAX_FUNCTION_LINES} lines): {too_long}"


def test_torch_load_always_has_weights_only() -> None:
    found = [
        f"{path.relative_to(REPO)}:{line}" for path in python_files() for line in unsafe_torch_loads(path.read_text())
    ]
    assert not found, f"torch.load without weights_only=True unpickles arbitrary code: {found}"


@pytest.mark.parametrize(
    ("source", "bad"),
    [
        ("import torch\ntorch.load(p)", [2]),
        ("import torch\ntorch.load(p, weights_only=False)", [2]),
        ("import torch\ntorch.serialization.load(p, map_location='cpu')", [2]),
        ("from torch import load as tl\ntl(p)", [2]),
        ("import torch\ntorch.load(p, weights_only=True)", []),
        ("import numpy as np\nnp.load(p)", []),
    ],
)
def test_the_torch_load_check_sees_every_spelling(source: str, bad: list[int]) -> None:
    assert unsafe_torch_loads(source) == bad


def test_no_import_circles() -> None:
    """No two modules of the package import each other, directly or through others (annotation-only imports
    count: they couple the modules all the same)."""
    grimp = pytest.importorskip("grimp", reason="grimp comes with import-linter (the dev extra)")
    graph = grimp.build_graph("amago_pipe", include_external_packages=False)
    circles = sorted(
        (a, b)
        for a in graph.modules
        for b in graph.find_modules_directly_imported_by(a)
        if a < b and graph.find_shortest_chain(importer=b, imported=a) is not None
    )
    assert not circles, f"modules in an import circle (each pair: a imports b, b reaches a): {circles}"
