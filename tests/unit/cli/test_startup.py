"""`amago-pipe --help` and `validate` must start fast: they never import torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cli_support import cli_env

REPO = Path(__file__).resolve().parents[3]

PROBE = """
import sys
from amago_pipe.cli import main
try:
    main({args!r}, prog_name="amago-pipe")
except SystemExit as e:
    code = e.code
heavy = sorted(m for m in ("torch", "accelerate", "wandb", "minari", "matplotlib") if m in sys.modules)
print("HEAVY=" + ",".join(heavy))
"""


def probe(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", PROBE.format(args=args)],
        cwd=cwd,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout + proc.stderr


def test_help_imports_no_torch(tmp_path: Path):
    out = probe(["--help"], tmp_path)
    assert "Usage: amago-pipe" in out
    assert "HEAVY=\n" in out


def test_validate_imports_no_torch(tmp_path: Path):
    pipelines = sorted(str(p) for p in (REPO / "pipelines").glob("*.yaml"))
    assert pipelines, "the repository ships example pipelines"
    out = probe(["validate", *pipelines], tmp_path)
    assert out.count("ok  ") == len(pipelines), out
    assert "HEAVY=\n" in out, out


def test_version(amago):
    proc = amago("--version", check=True)
    assert proc.stdout.startswith("amago-pipe, version ")
