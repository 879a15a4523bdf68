"""The MiniGrid benchmark pipelines (benchmarks/minigrid/, a plugin policy on PYTHONPATH) run end to end at a smoke
size against the real MiniGrid package, with the image's ids read as categories (`one_hot`)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from cli_support import cli_env

from amago_pipe.train.checkpoint import load_weights

REPO = Path(__file__).resolve().parents[2]
MINIGRID = REPO / "benchmarks/minigrid"
PIPELINES = sorted(MINIGRID.glob("*.yaml"))
SMOKE = yaml.safe_load((Path(__file__).parent / "smoke_overrides.yaml").read_text())


def test_every_minigrid_pipeline_has_smoke_overrides() -> None:
    assert PIPELINES
    missing = [p.name for p in PIPELINES if f"minigrid/{p.name}" not in SMOKE]
    assert not missing, f"add smoke-size overrides for minigrid/{missing} to tests/smoke/smoke_overrides.yaml"


def run_minigrid(tmp_path: Path, pipeline: Path, *extra: str) -> None:
    """`amago-pipe run PIPELINE` at its smoke size (plus `extra` args) in `tmp_path`, benchmarks/minigrid on
    PYTHONPATH, into the run dir `run`; skip without minigrid."""
    if importlib.util.find_spec("minigrid") is None:
        pytest.skip('the MiniGrid pipelines need the `envs` extra: pip install -e ".[envs]"')
    base = cli_env()
    env = {**base, "PYTHONPATH": os.pathsep.join([str(MINIGRID), base["PYTHONPATH"]])}
    overrides = [arg for item in SMOKE[f"minigrid/{pipeline.name}"] for arg in ("--set", item)]
    command = [sys.executable, "-m", "amago_pipe.cli", "run", str(pipeline), *overrides, *extra, "--run-dir", "run"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_minigrid_pipeline_runs(tmp_path: Path, pipeline: Path) -> None:
    run_minigrid(tmp_path, pipeline)
    lock = json.loads((tmp_path / "run/pipeline.lock.json").read_text())["stages"]
    assert set(lock) >= {"train", "evaluate"} and all(r["status"] == "done" for r in lock.values()), lock
    report = json.loads((tmp_path / "run/stages/evaluate/report.json").read_text())
    assert report["env"].startswith("minigrid:MiniGrid-Memory") and report["summary"]["episodes"] == 2


def test_minigrid_images_through_a_cnn_train_and_export(tmp_path: Path) -> None:
    """MiniGrid's uint8 image of ids through the IMPALA CNN (its channels standardised by running statistics):
    trains, evaluates, and exports with every form verified against the trained weights."""
    cnn = "{type: cnn, cnn: impala, impala_channels: [4], img_features: 16, vector_features: 8, d_output: 32}"
    run_minigrid(tmp_path, MINIGRID / "memory-offline.yaml", "--set", f"stages.train.model.tstep_encoder={cnn}")
    policy = tmp_path / "run/stages/train/policy/latest.safetensors"
    assert float(load_weights(policy)["model.tstep_encoder.img_norms.image.count"]) > 0
    forms = ("torchscript", "torch_export", "onnx")
    command = [sys.executable, "-m", "amago_pipe.cli", "export", "run", "--out", "exp"]
    command += [arg for form in forms for arg in ("--form", form)]
    proc = subprocess.run(command, cwd=tmp_path, env=cli_env(), capture_output=True, text=True, timeout=200)
    assert proc.returncode == 0 and "verified on" in proc.stdout, proc.stdout + proc.stderr
    errors = json.loads((tmp_path / "exp/manifest.json").read_text())["verification"]["max_error"]
    assert set(errors) == {"weights", *forms} and max(errors.values()) <= 1e-4, errors


def test_looker_sees_the_same_walls_in_ids_one_hot_and_pixels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The looker policy reads the cell ahead from each image form the benchmarks feed it; three copies of one
    MiniGrid episode agree at every step."""
    if importlib.util.find_spec("minigrid") is None:
        pytest.skip('the MiniGrid benchmarks need the `envs` extra: pip install -e ".[envs]"')
    monkeypatch.syspath_prepend(str(MINIGRID))
    import gymnasium as gym
    import numpy as np
    from looker import _wall_ahead
    from wrapped import make, make_rgb

    envs = [gym.make("minigrid:MiniGrid-MemoryS7-v0"), make(), make_rgb()]
    images = [env.reset(seed=3)[0]["image"] for env in envs]
    rng = np.random.default_rng(0)
    seen = []
    for _ in range(60):
        walls = [bool(_wall_ahead(img[None])[0]) for img in images]
        assert len(set(walls)) == 1, walls
        seen.append(walls[0])
        action = int(rng.choice([0, 1, 2, 2, 2]))  # left, right, forward
        images = [env.step(action)[0]["image"] for env in envs]
    assert any(seen) and not all(seen)
