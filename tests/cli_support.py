"""Environment for CLI subprocesses in tests (the test stage plugins importable, wandb off)."""

from __future__ import annotations

import os
from pathlib import Path

TESTS_DIR = Path(__file__).parent


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    env.setdefault("WANDB_MODE", "disabled")
    env["COLUMNS"] = "200"
    return env
