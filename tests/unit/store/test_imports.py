"""Importing the store (and its contract suite and CLI module) stays light: no torch, no click in the store."""

from __future__ import annotations

import subprocess
import sys


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
