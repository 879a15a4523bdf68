"""Data-parallel learner: `torchrun --nproc_per_node 2` on CPU (gloo) keeps both ranks' parameters identical."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_two_cpu_ranks_stay_in_sync_and_match_a_single_process() -> None:
    proc = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "ddp_check.py"), "--updates", "20"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "ranks hold identical parameters after training: True" in proc.stdout
    assert "every run stopped early after epoch 2 of 4 (validation patience): True" in proc.stdout
    assert "a resumed two-rank run trained nothing more: True" in proc.stdout
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| ddp rank")]
    assert len(rows) == 2 and all("| 2 x 12 |" in r for r in rows)
