"""The `convert` stage inside a real pipeline run: report in the stage folder, skip when unchanged, re-run
when the source changes (replacing its old copy), and a failing source that leaves the store as it was."""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np

from amago_pipe.store import TrajectoryStore
from amago_pipe.testing import synthetic as syn

PIPELINE = """\
version: 1
name: conv
store: store.zarr
stages:
  data: {type: convert, source: {type: d4rl, path: d.hdf5}, partition: protected}
  more: {type: convert, source: {type: d4rl, path: e.hdf5}, partition: protected, needs: []}
"""


def write(tmp_path: Path, name: str, lengths: list[int], seed: int) -> Path:
    rng = np.random.default_rng(seed)
    eps = [syn.continuous_episode(rng, n, "timeout") for n in lengths]
    return syn.write_d4rl_hdf5(tmp_path / name, eps)


def lock(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "runs/conv/pipeline.lock.json").read_text())["stages"]


def test_convert_stage_runs_skips_and_reruns(amago, tmp_path: Path):
    write(tmp_path, "d.hdf5", [4, 6], seed=0)
    write(tmp_path, "e.hdf5", [3], seed=1)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    amago("run", "p.yaml", check=True)
    report = json.loads((tmp_path / "runs/conv/stages/data/report.json").read_text())
    assert report["status"] == "converted" and report["timesteps"] == 10 and report["accounting"]["balanced"]
    assert lock(tmp_path)["data"]["metrics"]["timesteps"] == 10
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").timesteps == 13

    second = amago("run", "p.yaml", check=True).stdout
    assert second.count("unchanged") == 2

    write(tmp_path, "d.hdf5", [5, 5, 2], seed=2)
    third = amago("run", "p.yaml", check=True).stdout
    assert "input changed" in third and third.count("unchanged") == 1
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").timesteps == 15  # the old copy of d.hdf5 was replaced
    report = json.loads((tmp_path / "runs/conv/stages/data/report.json").read_text())
    assert "replaced_previous_conversion" in {a["kind"] for a in report["adjustments"]}


def test_failing_source_fails_the_stage_and_leaves_the_store(amago, tmp_path: Path):
    write(tmp_path, "d.hdf5", [4], seed=0)
    bad = write(tmp_path, "e.hdf5", [3, 3], seed=1)
    with h5py.File(bad, "a") as f:
        f["rewards"][4] = np.inf
    (tmp_path / "p.yaml").write_text(PIPELINE)
    proc = amago("run", "p.yaml")
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "episode 1: rewards has 1 non-finite value(s)" in proc.stderr
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").timesteps == 4
    assert lock(tmp_path)["more"]["status"] == "failed"


ONE_SOURCE = """\
version: 1
name: conv
store: store.zarr
stages:
  data: {type: convert, source: {type: d4rl, path: a.hdf5}, partition: protected}
"""


def test_a_new_source_replaces_the_stages_old_data_and_says_so(amago, tmp_path: Path):
    write(tmp_path, "a.hdf5", [40, 60], seed=0)
    write(tmp_path, "b.hdf5", [30], seed=1)
    write(tmp_path, "c.hdf5", [7], seed=2)
    (tmp_path / "p.yaml").write_text(ONE_SOURCE)
    amago("run", "p.yaml", check=True)
    switched = amago("run", "p.yaml", "--set", "stages.data.source.path=b.hdf5", check=True)
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").timesteps == 30  # a.hdf5's 100 steps were kept next to b's before
    report = json.loads((tmp_path / "runs/conv/stages/data/report.json").read_text())
    replaced = {a["kind"]: a for a in report["adjustments"]}["replaced_own_conversion"]
    assert replaced["timesteps"] == 100 and len(report["replaced_segments"]) == 1
    assert "2 episodes, 100 timesteps from" in switched.stderr and "a.hdf5" in switched.stderr
    assert "100 timesteps from" in (tmp_path / "runs/conv/stages/data/stage.log").read_text()
    other = amago("run", "p.yaml", "--run-dir", "runs/other", "--set", "stages.data.source.path=c.hdf5", check=True)
    assert "replaced_own_conversion" not in other.stderr + other.stdout
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").timesteps == 37  # another run's stage leaves this run's data alone
    again = amago("run", "p.yaml", "--run-dir", "runs/other", "--set", "stages.data.source.path=b.hdf5", check=True)
    assert "7 timesteps from" in again.stderr  # it already holds b.hdf5 (this run's copy): only c.hdf5 goes
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").timesteps == 30
