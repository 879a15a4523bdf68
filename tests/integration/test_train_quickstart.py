"""The quickstart pipeline at smoke size: collect -> convert -> train -> evaluate, then a second run skips all."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TINY = [
    "stages.collect.policies.0.episodes=4",
    "stages.collect.policies.1.episodes=4",
    "stages.collect.env.n_envs=2",
    "stages.train.epochs=2",
    "stages.train.updates_per_epoch=3",
    "stages.train.max_seq_len=8",
    "stages.train.batch_size=4",
    "stages.train.model.traj_encoder.d_model=16",
    "stages.train.model.traj_encoder.n_heads=2",
    "stages.train.model.traj_encoder.n_layers=1",
    "stages.evaluate.episodes=3",
    "stages.evaluate.env.n_envs=3",
    "stages.export.verify_steps=40",
]


def test_quickstart_smoke_runs_then_skips(tmp_path: Path, amago: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    overrides = [arg for item in TINY for arg in ("--set", item)]
    first = amago("run", str(REPO / "pipelines" / "quickstart.yaml"), *overrides, check=True, timeout=300)
    lock = json.loads((tmp_path / "runs/quickstart/pipeline.lock.json").read_text())["stages"]
    assert list(lock) == ["collect", "convert", "train", "evaluate", "export"]
    assert all(r["status"] == "done" for r in lock.values()), first.stdout
    stages = tmp_path / "runs/quickstart/stages"
    report = json.loads((stages / "evaluate/report.json").read_text())
    assert report["summary"]["episodes"] == 3 and len(report["episodes"]) == 3
    assert report["policy"] == {"train_stage": "train", "which": "latest", "file": "latest.safetensors", "epoch": 2}
    assert next(iter(lock["evaluate"]["metrics"])) == "mean_return"
    assert "| mean return |" in (stages / "evaluate/summary.md").read_text()
    assert (stages / "evaluate/returns.png").stat().st_size > 1000
    assert (stages / "train/plots/losses.png").exists() and (stages / "train/policy/epoch_0002.safetensors").exists()
    manifest = json.loads((stages / "export/artifact/manifest.json").read_text())
    assert manifest["evaluation"]["episodes"] == 3 and manifest["policy"]["epoch"] == 2
    second = amago("run", str(REPO / "pipelines" / "quickstart.yaml"), *overrides, check=True, timeout=300)
    assert second.stdout.count("unchanged") == 5, second.stdout


def test_collect_with_a_trained_checkpoint(tmp_path: Path, amago: Any) -> None:
    overrides = [arg for item in TINY for arg in ("--set", item)]
    amago("run", str(REPO / "pipelines" / "quickstart.yaml"), *overrides, "--until", "train", check=True, timeout=300)
    policy = "checkpoint:runs/quickstart/stages/train/policy/latest.safetensors"
    out = amago(
        "collect",
        "CartPole-v1",
        "--policy",
        policy,
        "--episodes",
        "3",
        "--n-envs",
        "2",
        "--store",
        "online.zarr",
        "--partition",
        "fifo",
        check=True,
    )
    assert "collected 3 episodes" in out.stdout
    missing = amago(
        "collect", "CartPole-v1", "--policy", "checkpoint:nope.safetensors", "--episodes", "1", "--store", "online.zarr"
    )
    assert missing.returncode != 0 and "policy file 'nope.safetensors' does not exist" in missing.stderr
