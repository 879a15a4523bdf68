"""The T-Maze pipeline trained on a CUDA GPU (fp32 with validation and evaluation there too, bf16, torch.compile)
(skipped without CUDA)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "stages.collect.policies.0.episodes=16",
    "stages.train.epochs=2",
    "stages.train.updates_per_epoch=5",
    "stages.evaluate.episodes=4",
    "stages.evaluate.env.n_envs=4",
]


VALIDATE = (
    "stages.train.validate={env: {id: amago_pipe/TMaze-v0, kwargs: {corridor_length: 30}, n_envs: 4}, episodes: 4}"
)


@pytest.mark.parametrize(
    "extra",
    [
        ["stages.train.device=cuda", "stages.evaluate.device=cuda", VALIDATE],
        ["stages.train.mixed_precision=bf16"],
        ["stages.train.compile=true"],
    ],
)
def test_tmaze_pipeline_trains_on_the_gpu(tmp_path: Path, amago: Any, extra: list[str]) -> None:
    overrides = [arg for item in [*TINY, *extra] for arg in ("--set", item)]
    amago("run", str(REPO / "pipelines" / "tmaze-memory.yaml"), *overrides, check=True, timeout=600)
    stages = tmp_path / "runs/tmaze-memory/stages"
    summary = json.loads((stages / "train/train_summary.json").read_text())
    assert summary["steps"] == 10 and summary["epochs"] == 2
    assert all(abs(summary[k]) < 1e6 for k in ("actor_loss", "critic_loss")), summary  # finite, no NaN
    report = json.loads((stages / "evaluate/report.json").read_text())
    assert report["summary"]["episodes"] == 4
