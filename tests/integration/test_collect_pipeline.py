"""A pipeline with collect stages runs through the engine, writes report.json, and skips when unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PIPELINE = """
version: 1
name: coll
store: store.zarr
stages:
  data:
    type: collect
    env: {id: CartPole-v1, n_envs: 4}
    policies:
      - {policy: {type: random}, episodes: 6}
      - {policy: {type: cartpole-pd, exploration: {type: egreedy, epsilon: 0.3}}, episodes: 4}
  mdata:
    type: collect
    needs: []
    env: {id: Pendulum-v1, n_envs: 2}
    policies: [{policy: {type: pendulum-energy, exploration: {type: gaussian, std: 0.1}}, episodes: 2}]
    output: minari
    dataset_id: pendulum/mixed-v0
"""


def test_collect_stages_run_then_skip(tmp_path: Path, amago: Any, monkeypatch: Any) -> None:
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    (tmp_path / "p.yaml").write_text(PIPELINE)
    first = amago("run", "p.yaml", check=True)
    assert "episodes=10" in first.stdout
    report = json.loads((tmp_path / "runs/coll/stages/data/report.json").read_text())
    assert report["total"]["episodes"] == 10 and report["output"]["partition"] == "protected"
    assert (tmp_path / "minari/pendulum/mixed-v0/data/metadata.json").exists()
    second = amago("run", "p.yaml", check=True)
    assert second.stdout.count("unchanged") == 2
    forced = amago("run", "p.yaml", "--force", "data", check=True)
    assert "forced" in forced.stdout
    report = json.loads((tmp_path / "runs/coll/stages/data/report.json").read_text())
    assert report["output"]["replaced_segments"] == 1
