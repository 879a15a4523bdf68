"""Who owns what in a shared store: online data is tagged with its run directory's id, a resume drops only its own
run's segments, a FIFO partition holding another run's online data is refused (followers' data is their run's)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_support import cli_env, toy_online_pipeline

from amago_pipe.errors import DataError
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store
from amago_pipe.testing.episodes import example_specs, random_episode
from amago_pipe.train.online import (
    EPOCH_ATTR,
    RUN_ATTR,
    RUN_ID_ATTR,
    check_owner,
    collected_fingerprint,
    drop_collected_after,
)


def _spawn(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", *args],
        cwd=cwd,
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_after_checkpoint(tmp_path: Path, proc: subprocess.Popen[str], run_dir: str) -> None:
    state = tmp_path / run_dir / "stages/train/checkpoints/latest/state.json"
    deadline = time.monotonic() + 180
    while not state.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    out, err = proc.communicate()
    assert proc.returncode == -signal.SIGKILL and state.exists(), out + err  # killed mid-run, after a checkpoint


def _run_id(tmp_path: Path, run_dir: str) -> str:
    return str(json.loads((tmp_path / run_dir / "pipeline.lock.json").read_text())["run_id"])


def _segments(tmp_path: Path) -> list[tuple[str, str, str]]:
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    return sorted((s.id, str(s.attrs.get(RUN_ATTR)), str(s.attrs.get(RUN_ID_ATTR))) for s in store.segments("fifo"))


def _refused(tmp_path: Path, other: str, run_id: str) -> None:
    """Run directory `runs/b` of the same pipeline and store is refused, naming the run that owns the FIFO."""
    before = _segments(tmp_path)
    proc = _spawn(tmp_path, "run", "p.yaml", "--run-dir", "runs/b")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 3, out + err
    assert "stages.train.online.partition: store partition 'fifo'" in err and "holds online data of another run" in err
    assert f"({other}, run {run_id}:" in err and "--set store=" in err, err
    assert _segments(tmp_path) == before  # nothing written, nothing dropped


def test_a_second_run_dir_is_refused_the_fifo_and_the_first_resumes_with_its_data(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        toy_online_pipeline(name="own", own=40, epochs=3, updates=40, extra="    ckpt_interval: 1\n")
    )
    _kill_after_checkpoint(tmp_path, _spawn(tmp_path, "run", "p.yaml", "--run-dir", "runs/a"), "runs/a")
    run_a = _run_id(tmp_path, "runs/a")
    _refused(tmp_path, "own/train", run_a)  # before: b ran, sampled a's episodes and then owned them as well
    resumed = _spawn(tmp_path, "run", "p.yaml", "--run-dir", "runs/a")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert verify_store(store).ok
    segments = store.segments("fifo")
    assert sorted(int(s.attrs[EPOCH_ATTR]) for s in segments) == [0, 1, 2]  # each epoch once
    assert {(s.attrs[RUN_ATTR], s.attrs[RUN_ID_ATTR]) for s in segments} == {("own/train", run_a)}
    _refused(tmp_path, "own/train", run_a)  # a finished run's FIFO too


def test_followers_data_belongs_to_the_run_they_follow(tmp_path: Path) -> None:
    """A learner that only trains (`timesteps_per_epoch: 0`) on one follower's data: killed and resumed, it keeps
    its follower's segments; another run directory is refused them."""
    (tmp_path / "p.yaml").write_text(
        toy_online_pipeline(name="own", own=0, epochs=3, updates=40, extra="    ckpt_interval: 1\n")
    )
    learner = _spawn(tmp_path, "run", "p.yaml", "--run-dir", "runs/a")
    policy = tmp_path / "runs/a/stages/train/policy/latest.safetensors"
    deadline = time.monotonic() + 120
    while not policy.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    follower = _spawn(tmp_path, "collect", "--follow", "runs/a")
    _kill_after_checkpoint(tmp_path, learner, "runs/a")  # it cannot finish epoch 0 without the follower's data
    follower.communicate(timeout=120)  # stops once its learner is gone
    run_a = _run_id(tmp_path, "runs/a")
    kept = _segments(tmp_path)
    assert kept and {(label.split(":")[0], rid) for _, label, rid in kept} == {("follower", run_a)}
    _refused(tmp_path, kept[-1][1], run_a)
    resumed = _spawn(tmp_path, "run", "p.yaml", "--run-dir", "runs/a")
    out, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, out + err
    assert _segments(tmp_path) == kept  # the resume dropped none of them


def _write(store: TrajectoryStore, label: str, run_id: str | None, epoch: int, rng: np.random.Generator) -> str:
    attrs = {RUN_ATTR: label, EPOCH_ATTR: epoch, **({RUN_ID_ATTR: run_id} if run_id else {})}
    with store.writer("fifo", attrs=attrs) as writer:
        writer.add(random_episode(store.spec, 5, rng))
    return writer.sealed[-1].id


def test_resume_drops_the_segments_of_its_own_run_only(tmp_path: Path) -> None:
    """Segments of one `<pipeline>/<stage>` label from two run directories, one made before run ids, a follower."""
    rng = np.random.default_rng(0)
    store = TrajectoryStore.create(tmp_path / "s.zarr", example_specs()["discrete"])
    a0, a2 = _write(store, "p/train", "a-1", 0, rng), _write(store, "p/train", "a-1", 2, rng)
    b2 = _write(store, "p/train", "b-1", 2, rng)
    old2 = _write(store, "p/train", None, 2, rng)
    follower = _write(store, "follower:h:1", "a-1", 2, rng)
    fingerprint = collected_fingerprint(store, "fifo", "p/train@b-1")
    assert drop_collected_after(store, "fifo", "p/train@a-1", 1) == 1  # before: a2, b2 and old2 all went
    assert [s.id for s in store.segments("fifo")] == [a0, b2, old2, follower]
    assert drop_collected_after(store, "fifo", "p/train", 1) == 1  # a run dir from before run ids: its own tag
    assert [s.id for s in store.segments("fifo")] == [a0, b2, follower]
    assert collected_fingerprint(store, "fifo", "p/train@b-1") == fingerprint != "missing"
    assert a2 not in {s.id for s in store.segments("fifo")}


def test_check_owner_counts_followers_as_their_runs(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    store = TrajectoryStore.create(tmp_path / "s.zarr", example_specs()["discrete"])
    check_owner(store, "fifo", "p/train@a-1", where="w")  # no partition yet
    _write(store, "p/train", "a-1", 0, rng)
    _write(store, "follower:h:1", "a-1", 0, rng)
    check_owner(store, "fifo", "p/train@a-1", where="w")
    check_owner(store, "fifo", "p/other@a-1", where="w")  # another stage of the same run directory
    with pytest.raises(
        DataError, match=r"w: store partition 'fifo' .* another run \(follower:h:1, run a-1: 2 episodes"
    ):
        check_owner(store, "fifo", "p/train@b-1", where="w")
    with pytest.raises(DataError, match="another run"):
        check_owner(store, "fifo", "p/train", where="w")  # a run dir from before run ids
    legacy = TrajectoryStore.create(tmp_path / "old.zarr", example_specs()["discrete"])
    _write(legacy, "p/train", None, 0, rng)
    check_owner(legacy, "fifo", "p/train", where="w")  # neither has an id: as before
    with pytest.raises(DataError, match=r"\(p/train, run made before run ids: 1 episode,"):
        check_owner(legacy, "fifo", "p/train@a-1", where="w")


RELABEL = """
version: 1
name: gm
store: store.zarr
stages:
  collect:
    type: collect
    env: {id: amago_pipe/GoalMaze-v0, kwargs: {size: 5, n_goals: 1, layout: open}, n_envs: 2}
    policies: [{policy: {type: random}, episodes: 6}]
  relabel:
    type: relabel
    strategy: {type: future}
    reward: {type: env, env: {id: amago_pipe/GoalMaze-v0, kwargs: {size: 5, n_goals: 1}}}
"""


def test_relabel_stages_of_two_run_dirs_keep_each_others_copies(tmp_path: Path, amago: Any) -> None:
    (tmp_path / "p.yaml").write_text(RELABEL)
    amago("run", "p.yaml", "--run-dir", "runs/a", check=True)
    amago("run", "p.yaml", "--run-dir", "runs/b", "--set", "seed=1", check=True)
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert store.partition_info("protected").episodes == 12  # both runs' walks (b's stage dropped a's before)
    assert store.partition_info("relabeled").episodes == 6 * 4 + 12 * 4  # b relabeled both; a's copies stay
    owners = {str(s.attrs["relabel_stage"]) for s in store.segments("relabeled")}
    assert owners == {f"gm/relabel@{_run_id(tmp_path, 'runs/a')}", f"gm/relabel@{_run_id(tmp_path, 'runs/b')}"}
