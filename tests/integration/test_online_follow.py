"""Decoupled actors: `amago-pipe collect --follow RUN_DIR` processes act with a running learner's newest policy
and fill its fifo partition until it finishes; with `timesteps_per_epoch: 0` the learner trains on theirs alone."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cli_support import cli_env, toy_online_pipeline

from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store
from amago_pipe.train.online import RUN_ATTR

RUN = Path("runs/follow")


def _spawn(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", *args],
        cwd=cwd,
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _followers_after_start(
    tmp_path: Path, own: int, epochs: int = 4, updates: int = 60, seeds: bool = True
) -> tuple[subprocess.Popen[str], list[subprocess.Popen[str]]]:
    (tmp_path / "p.yaml").write_text(toy_online_pipeline(name="follow", own=own, epochs=epochs, updates=updates))
    learner = _spawn(tmp_path, "run", "p.yaml")
    deadline = time.monotonic() + 60
    while not (tmp_path / RUN / "stages/train/policy/latest.safetensors").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    seed = ["--seed", "{}"] if seeds else []  # without --seed each follower draws its own
    return learner, [_spawn(tmp_path, "collect", "--follow", str(RUN), *[a.format(i) for a in seed]) for i in range(2)]


@pytest.mark.slow  # 100-240 s: two follower processes and a learner share the cores
def test_two_followers_fill_the_fifo_until_the_learner_finishes(tmp_path: Path) -> None:
    learner, followers = _followers_after_start(tmp_path, own=20, epochs=5, updates=400)  # outlasts their start-up
    out, err = learner.communicate(timeout=300)
    assert learner.returncode == 0, out + err
    for f in followers:
        fout, ferr = f.communicate(timeout=120)
        assert f.returncode == 0 and "stage 'train' finished:" in fout, fout + ferr
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert verify_store(store).ok
    tags = {s.attrs.get(RUN_ATTR) for s in store.segments("fifo")}
    assert "follow/train" in tags and len([t for t in tags if str(t).startswith("follower:")]) == 2
    rows = [json.loads(line) for line in (tmp_path / RUN / "stages/train/metrics.jsonl").read_text().splitlines()]
    assert any("online/staleness_mean" in r for r in rows)


def test_a_learner_that_only_trains_waits_for_its_actors(tmp_path: Path) -> None:
    learner, followers = _followers_after_start(tmp_path, own=0, seeds=False)
    out, err = learner.communicate(timeout=300)
    assert learner.returncode == 0, out + err
    seeds = set()
    for f in followers:
        fout, _ = f.communicate(timeout=120)
        seeds.add(fout.split("follower seed ")[1].split()[0])
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert {str(s.attrs.get(RUN_ATTR)).split(":")[0] for s in store.segments("fifo")} == {"follower"}
    assert len(seeds) == 2  # without --seed, each actor draws its own stream (they collected the same episodes)


def test_following_a_run_without_an_online_stage_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run/pipeline.lock.json").write_text(json.dumps({"format": 1, "stages": {}}))
    proc = _spawn(tmp_path, "collect", "--follow", "run")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "expected one online train stage in its lock file, found none" in err, err
    assert "Traceback" not in err
    proc = _spawn(tmp_path, "collect", "--follow", "run", "--episodes", "5", "--policy", "cartpole-pd")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "--episodes, --policy cannot be used with --follow" in err, err
    proc = _spawn(tmp_path, "collect", "--follow", "nowhere")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in err and err.startswith("error:"), err
