"""Quality gates of the example pipelines at full size (slow: about 1 and 5 minutes on a 2-core CPU)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))


@pytest.mark.slow
@pytest.mark.parametrize(("pipeline", "target"), [("quickstart", 475.0), ("pendulum-offline", -200.0)])
def test_offline_pipeline_solves_its_task(tmp_path: Path, pipeline: str, target: float) -> None:
    from bench_quality import run_seed  # type: ignore[import-not-found]

    result = run_seed(pipeline, 0, tmp_path, [])
    assert "error" not in result, result
    assert result["eval_episodes"] == 50
    assert result["eval_mean_return"] >= target, result
