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

REPO = Path(__file__).resolve().parents[2]
MINIGRID = REPO / "benchmarks/minigrid"
PIPELINES = sorted(MINIGRID.glob("*.yaml"))
SMOKE = yaml.safe_load((Path(__file__).parent / "smoke_overrides.yaml").read_text())


def test_every_minigrid_pipeline_has_smoke_overrides() -> None:
    assert PIPELINES
    missing = [p.name for p in PIPELINES if f"minigrid/{p.name}" not in SMOKE]
    assert not missing, f"add smoke-size overrides for minigrid/{missing} to tests/smoke/smoke_overrides.yaml"


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.stem for p in PIPELINES])
def test_minigrid_pipeline_runs(tmp_path: Path, pipeline: Path) -> None:
    if importlib.util.find_spec("minigrid") is None:
        pytest.skip('the MiniGrid pipelines need the `envs` extra: pip install -e ".[envs]"')
    base = cli_env()
    env = {**base, "PYTHONPATH": os.pathsep.join([str(MINIGRID), base["PYTHONPATH"]])}
    overrides = [arg for item in SMOKE[f"minigrid/{pipeline.name}"] for arg in ("--set", item)]
    command = [sys.executable, "-m", "amago_pipe.cli", "run", str(pipeline), *overrides, "--run-dir", "run"]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=280)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lock = json.loads((tmp_path / "run/pipeline.lock.json").read_text())["stages"]
    assert set(lock) >= {"train", "evaluate"} and all(r["status"] == "done" for r in lock.values()), lock
    report = json.loads((tmp_path / "run/stages/evaluate/report.json").read_text())
    assert report["env"].startswith("minigrid:MiniGrid-Memory") and report["summary"]["episodes"] == 2
