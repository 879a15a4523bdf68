"""Every example pipeline runs end to end at a smoke size, and a second run skips every stage."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PIPELINES = sorted((REPO / "pipelines").glob("*.yaml"))
SMOKE = yaml.safe_load((Path(__file__).parent / "smoke_overrides.yaml").read_text())
OPTIONAL = {
    "popgym-memory.yaml": ("popgym", "envs"),
    "popgym-suite.yaml": ("popgym", "envs"),
    "online-gymnax-memorychain.yaml": ("gymnax", "gymnax"),
    "metaworld-ml1-kshot.yaml": ("metaworld", "metaworld"),
    "metaworld-ml1-demos.yaml": ("metaworld", "metaworld"),
    "metaworld-ml10.yaml": ("metaworld", "metaworld"),
    "babyai-multitask.yaml": ("minigrid", "envs"),
    "atari-multigame.yaml": ("ale_py", "atari"),
    "procgen-multitask.yaml": ("procgen", "procgen"),
    "crafter-instructions.yaml": ("crafter", "crafter"),
    "minatar-multigame.yaml": ("gymnax", "gymnax"),
    "minatar-breakout.yaml": ("gymnax", "gymnax"),
}
"""Pipelines that need an optional extra: (the module they import, the extra); skipped when it is missing."""
SLOW = {"minatar-multigame.yaml", "minatar-breakout.yaml"}
"""Smoke runs too long for the default suite (JAX compiles one env per game): `python -m pytest -m slow`."""


def test_every_pipeline_has_smoke_overrides():
    assert PIPELINES
    missing = [p.name for p in PIPELINES if p.name not in SMOKE]
    assert not missing, f"add smoke-size overrides for {missing} to tests/smoke/smoke_overrides.yaml"


@pytest.mark.parametrize(
    "pipeline",
    [pytest.param(p, marks=pytest.mark.slow) if p.name in SLOW else p for p in PIPELINES],
    ids=[p.stem for p in PIPELINES],
)
def test_pipeline_runs_then_skips(amago, tmp_path: Path, pipeline: Path):
    needs, extra = OPTIONAL.get(pipeline.name, ("", ""))
    if needs and importlib.util.find_spec(needs) is None:
        pytest.skip(f"{pipeline.name} needs the optional package '{needs}': pip install -e \".[{extra}]\"")
    overrides = [arg for item in SMOKE.get(pipeline.name, []) for arg in ("--set", item)]
    first = amago("run", str(pipeline), *overrides, "--run-dir", "run", timeout=600)
    assert first.returncode == 0, first.stdout + first.stderr
    lock = json.loads((tmp_path / "run/pipeline.lock.json").read_text())["stages"]
    assert lock and all(r["status"] == "done" for r in lock.values()), lock
    second = amago("run", str(pipeline), *overrides, "--run-dir", "run", timeout=600)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("skip ") == len(lock), second.stdout
