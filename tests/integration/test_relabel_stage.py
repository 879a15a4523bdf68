"""The relabel stage in the engine: collect GoalMaze walks -> relabel -> train on both partitions; caching, re-runs
that replace the stage's own copies, and bad input that leaves the target partition as it was."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.store import TrajectoryStore

PIPELINE = """
version: 1
name: gm
store: store.zarr
stages:
  collect:
    type: collect
    env: {id: amago_pipe/GoalMaze-v0, kwargs: {size: 5, n_goals: N_GOALS, layout: open}, n_envs: 4}
    policies: [{policy: {type: random}, episodes: 24}]
  relabel:
    type: relabel
    strategy: {type: STRATEGY}
    reward: {type: env, env: {id: amago_pipe/GoalMaze-v0, kwargs: {size: 5, n_goals: N_GOALS}}}
  train:
    type: train
    partitions: {protected: 0.5, relabeled: 0.5}
    max_seq_len: 8
    batch_size: 4
    epochs: 1
    updates_per_epoch: 3
    warmup_steps: 1
    model: {traj_encoder: {type: ff, d_model: 16}}
"""


def write(tmp_path: Path, strategy: str = "future", n_goals: int = 1) -> None:
    text = PIPELINE.replace("STRATEGY", strategy).replace("N_GOALS", str(n_goals))
    (tmp_path / "p.yaml").write_text(text)


def report(tmp_path: Path) -> dict[str, Any]:
    return json.loads((tmp_path / "runs/gm/stages/relabel/report.json").read_text())  # type: ignore[no-any-return]


def test_relabel_stage_caches_replaces_its_copies_and_feeds_train(tmp_path: Path, amago: Any) -> None:
    write(tmp_path)
    first = amago("run", "p.yaml", check=True)
    assert "episodes_out=96" in first.stdout  # 24 walks x k=4
    store = TrajectoryStore.open(str(tmp_path / "store.zarr"))
    source_before = store.fingerprint("protected")
    rep = report(tmp_path)
    assert rep["episodes_in"] == 24 and rep["success_rate_out"] == 1.0 and rep["reward_mismatch_steps"] == 0
    assert 0 <= rep["success_rate_in"] < 1
    assert store.partition_info("relabeled").episodes == 96
    assert {ep.source for ep in store.iter_episodes("relabeled")} == {"collect:random"}
    summary = json.loads((tmp_path / "runs/gm/stages/train/train_summary.json").read_text())
    assert summary.get("buffer/relabeled_timesteps", rep["timesteps_out"]) == rep["timesteps_out"]

    second = amago("run", "p.yaml", check=True)
    assert second.stdout.count("unchanged") == 3

    changed = amago("run", "p.yaml", "--set", "stages.relabel.strategy.k=2", check=True)
    assert "episodes_out=48" in changed.stdout and "re-runs" in changed.stdout
    store = TrajectoryStore.open(str(tmp_path / "store.zarr"))
    assert store.partition_info("relabeled").episodes == 48  # its earlier copies were replaced
    assert report(tmp_path)["replaced_segments"] == 1
    assert store.fingerprint("protected") == source_before  # the source is never touched
    episodes = list(store.iter_episodes("relabeled"))
    assert all(ep.meta["relabel"]["strategy"] == "future" for ep in episodes)
    assert all(bool(ep.terminated[-1]) and ep.total_return == 1.0 for ep in episodes)


def test_goal_sequences_relabel_with_all(tmp_path: Path, amago: Any) -> None:
    write(tmp_path, "all", n_goals=2)
    amago("run", "p.yaml", "--until", "relabel", check=True)
    store = TrajectoryStore.open(str(tmp_path / "store.zarr"))
    for ep in store.iter_episodes("relabeled"):
        assert ep.total_return == 2.0 and ep.terminated[-1]
        masked = (ep.obs["desired_goal"] == -1).all(-1).sum(-1)
        assert masked[0] == 0 and masked[-1] == 2 and (np.diff(masked) >= 0).all()


BAD_REWARD = """
import numpy as np
calls = [0]
def reward(achieved, desired, info):
    calls[0] += 1
    if calls[0] > 30:
        return np.zeros((len(achieved), 2))
    return (np.abs(achieved - desired).sum(-1) < 0.5).astype(np.float32)
"""


def test_bad_input_leaves_the_target_as_it_was(tmp_path: Path, amago: Any) -> None:
    write(tmp_path)
    (tmp_path / "badreward.py").write_text(BAD_REWARD)
    bad = ["--set", "stages.relabel.reward={type: function, function: 'badreward:reward'}"]
    env_path = ["--set", "stages.relabel.reward.success_reward=1.0"]
    proc = amago("run", "p.yaml", "--until", "relabel", *bad, *env_path)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "partition 'protected' episode" in out and "returned shape" in out and "Traceback" not in out
    store = TrajectoryStore.open(str(tmp_path / "store.zarr"))
    assert "relabeled" not in store.partitions()  # nothing half-written

    amago("run", "p.yaml", "--until", "relabel", check=True)  # a good run, then a failing one keeps its copies
    fingerprint = TrajectoryStore.open(str(tmp_path / "store.zarr")).fingerprint("relabeled")
    proc = amago("run", "p.yaml", "--until", "relabel", *bad)
    assert proc.returncode == 3
    assert TrajectoryStore.open(str(tmp_path / "store.zarr")).fingerprint("relabeled") == fingerprint

    proc = amago("run", "p.yaml", "--until", "relabel", "--set", "stages.relabel.strategy={type: some}")
    assert proc.returncode == 2 and "strategy 'some' is for goal sequences" in proc.stdout + proc.stderr


def test_sample_time_relabeling_in_a_train_stage(tmp_path: Path, amago: Any) -> None:
    write(tmp_path)
    sample_time = "{strategy: {type: future}, ratio: 0.5, reward: {type: env, env: {id: amago_pipe/GoalMaze-v0}}}"
    proc = amago(
        "run", "p.yaml", "--set", f"stages.train.relabel={sample_time}",
        "--set", "stages.train.partitions={protected: 1.0}", check=True,
    )  # fmt: skip
    assert "done train" in proc.stdout
    proc = amago("run", "p.yaml", "--set", "stages.train.relabel={strategy: {type: all}}",
                 "--set", "stages.train.partitions={protected: 1.0}")  # fmt: skip
    assert proc.returncode == 2 and "stages.train.relabel.strategy.type" in proc.stdout + proc.stderr


MINARI_PIPELINE = """
version: 1
name: gm-minari
store: store.zarr
stages:
  collect:
    type: collect
    env: {id: amago_pipe/GoalMaze-v0, kwargs: {size: 5, layout: open}, n_envs: 2}
    policies: [{policy: {type: random}, episodes: 10}]
    output: minari
    dataset_id: goalmaze/random-v0
  convert:
    type: convert
    source: {type: minari, dataset: goalmaze/random-v0, goals_from_obs: true}
  relabel:
    type: relabel
    strategy: {type: final}
    reward: {type: threshold, distance: 0.1}
"""


def test_a_minari_goal_env_dataset_keeps_its_goals_and_relabels(tmp_path: Path, amago: Any) -> None:
    (tmp_path / "p.yaml").write_text(MINARI_PIPELINE)
    amago("run", "p.yaml", check=True)
    store = TrajectoryStore.open(str(tmp_path / "store.zarr"))
    assert set(store.spec.goals) == {"achieved_goal", "desired_goal"}
    assert {"achieved_goal", "desired_goal", "observation"} <= set(store.spec.observations)
    rep = json.loads((tmp_path / "runs/gm-minari/stages/relabel/report.json").read_text())
    assert rep["episodes_out"] == 10 and rep["success_rate_out"] == 1.0 and rep["reward_mismatch_steps"] == 0
    for ep in store.iter_episodes("relabeled"):  # both copies of the desired goal carry the new goal
        np.testing.assert_array_equal(ep.goals["desired_goal"], ep.obs["desired_goal"])
        assert (ep.obs["desired_goal"] == ep.obs["achieved_goal"][-1]).all()
