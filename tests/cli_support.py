"""Helpers for CLI subprocesses in tests: their environment (the test stage plugins importable, wandb off), waiting on a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

TESTS_DIR = Path(__file__).parent


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    env.setdefault("WANDB_MODE", "disabled")
    env["COLUMNS"] = "200"
    return env


def wait_for_progress(tmp_path: Path, at_least: int = 5) -> int:
    """Poll the `demo` pipeline's stage b (a paced test stage) until it has done `at_least` steps; its count."""
    progress = tmp_path / "runs/demo/stages/b/progress.txt"
    deadline = time.time() + 60
    while time.time() < deadline:
        text = progress.read_text() if progress.exists() else ""  # read once: the stage rewrites it meanwhile
        if text and int(text) >= at_least:
            return int(text)
        time.sleep(0.05)
    raise AssertionError("stage b never made progress")
