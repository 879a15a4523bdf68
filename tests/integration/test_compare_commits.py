"""`benchmarks/compare_commits.py` at smoke size, HEAD against the working tree: one row per config with finite
ratios, and its temporary worktree gone afterwards. No timing is asserted."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "compare_commits.py"
sys.path.insert(0, str(REPO / "benchmarks"))


def compare(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, cwd=cwd, timeout=280, check=False
    )


def worktrees() -> set[str]:
    out = subprocess.run(["git", "-C", str(REPO), "worktree", "list", "--porcelain"], capture_output=True, text=True)
    return {line for line in out.stdout.splitlines() if line.startswith("worktree ")}


@pytest.fixture(autouse=True)
def _git_checkout() -> None:
    if subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True).returncode != 0:
        pytest.skip("compare_commits.py needs a git checkout with a commit")


def test_quick_run_prints_one_row_per_config_with_finite_ratios(tmp_path: Path) -> None:
    from _compare_worker import DEFAULT_SET  # type: ignore[import-not-found]

    before = worktrees()
    proc = compare("HEAD", "--quick", "--json", str(tmp_path / "rows.json"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    rows = json.loads((tmp_path / "rows.json").read_text())["rows"]
    assert [r["config"] for r in rows] == DEFAULT_SET
    for r in rows:
        assert all(math.isfinite(r[k]) and r[k] > 0 for k in ("ratio", "ratio_min", "ratio_max")), r
        assert r["ratio_min"] <= r["ratio"] <= r["ratio_max"]
        assert r["windows"] == 2
    table = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    assert table[0].startswith("| config | unit | BASE /CPU-s | HEAD /CPU-s | HEAD/BASE (median) |")
    assert len(table) == 2 + len(DEFAULT_SET)
    assert {line.count("|") for line in table} == {9}
    assert "HEAD = working tree" in proc.stdout
    assert worktrees() == before


def test_unknown_names_and_revisions_are_refused_before_anything_runs(tmp_path: Path) -> None:
    proc = compare("HEAD", "--only", "learner,rolout", cwd=tmp_path)
    assert proc.returncode == 2
    assert "--only: unknown 'rolout' (groups: learner, rollout, store;" in proc.stderr
    proc = compare("no-such-revision", cwd=tmp_path)
    assert proc.returncode == 2
    assert "BASE 'no-such-revision': not a commit of" in proc.stderr
