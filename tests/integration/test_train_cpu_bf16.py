"""`mixed_precision: bf16` on a CPU: trains where the CPU multiplies bf16 natively (AMX or AVX512-BF16), is refused
with one line and no checkpoint elsewhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from amago_pipe.train.runtime import cpu_has_bf16_matmul

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "stages.collect.policies.0.episodes=16",
    "stages.train.epochs=2",
    "stages.train.updates_per_epoch=5",
    "stages.train.device=cpu",
    "stages.train.mixed_precision=bf16",
    "stages.evaluate.episodes=4",
    "stages.evaluate.env.n_envs=4",
]


def run_tiny(amago: Any, **kwargs: Any) -> Any:
    overrides = [arg for item in TINY for arg in ("--set", item)]
    return amago("run", str(REPO / "pipelines" / "tmaze-memory.yaml"), *overrides, timeout=600, **kwargs)


@pytest.mark.skipif(not cpu_has_bf16_matmul(), reason="this CPU has neither AMX nor AVX512-BF16")
def test_tmaze_pipeline_trains_in_bf16_on_this_cpu(tmp_path: Path, amago: Any) -> None:
    run_tiny(amago, check=True)
    stages = tmp_path / "runs/tmaze-memory/stages"
    summary = json.loads((stages / "train/train_summary.json").read_text())
    assert summary["steps"] == 10 and summary["epochs"] == 2
    assert all(abs(summary[k]) < 1e6 for k in ("actor_loss", "critic_loss")), summary  # finite, no NaN
    assert json.loads((stages / "evaluate/report.json").read_text())["summary"]["episodes"] == 4


@pytest.mark.skipif(cpu_has_bf16_matmul(), reason="this CPU multiplies bf16 natively, so bf16 is allowed here")
def test_bf16_is_refused_on_a_cpu_that_would_emulate_it(tmp_path: Path, amago: Any) -> None:
    out = run_tiny(amago)
    assert out.returncode != 0
    text = out.stdout + out.stderr
    assert "train.mixed_precision: bf16 on this CPU would be emulated" in text and "Traceback" not in text, text
    assert not list((tmp_path / "runs/tmaze-memory/stages").glob("train/checkpoints/*"))
