"""Shared fixtures: run CLI commands in a subprocess, with the test stage plugins importable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_support import cli_env

TESTS_DIR = Path(__file__).parent
if str(TESTS_DIR) not in sys.path:
    sys.path.insert(0, str(TESTS_DIR))


def usable_cpus() -> int:
    """CPUs this process may run on: its affinity mask (a container's share), not the host's count."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the default addopts): one worker per usable CPU; `--maxprocesses` still caps it."""
    return int(os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS") or usable_cpus())


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, share the cores: torch in each worker and in its CLI subprocesses gets cores / workers
    threads (torch's default of one per core in every process oversubscribes them, and OpenMP waits then dominate)."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    if workers > 1:
        os.environ.setdefault("OMP_NUM_THREADS", str(max(1, usable_cpus() // workers)))


@pytest.fixture
def amago(tmp_path: Path):
    """Run `amago-pipe ARGS` in tmp_path; returns the CompletedProcess (stdout+stderr text)."""

    env = {**cli_env(), "MINARI_DATASETS_PATH": str(tmp_path / "minari")}

    def run(*args: str, check: bool | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "amago_pipe.cli", *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
        return proc

    return run
