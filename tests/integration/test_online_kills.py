"""An online train stage killed at random moments (real processes, SIGKILL), then run to completion: the store
verifies, every epoch's episodes are there once, and the counters count every collected timestep once."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from cli_support import cli_env

from amago_pipe.store import TrajectoryStore
from amago_pipe.store.verify import verify_store
from amago_pipe.train.online import EPOCH_ATTR, RUN_ATTR, RUN_ID_ATTR

PIPELINE = """
version: 1
name: online-kills
store: {path: store.zarr, partitions: {fifo: {capacity_timesteps: 100000}}}
stages:
  train:
    type: train
    partitions: {fifo: 1.0}
    online:
      env: {factory: amago_pipe.envs.toy:make_toy_env, kwargs: {min_len: 4, max_len: 9}, n_envs: 2}
      timesteps_per_epoch: 40
    max_seq_len: 6
    batch_size: 4
    epochs: 6
    updates_per_epoch: 40
    warmup_steps: 1
    ckpt_interval: 1
    model:
      tstep_encoder: {type: ff, d_hidden: 16, d_output: 16}
      traj_encoder: {type: gru, d_model: 16, n_layers: 1}
    agent: {type: agent, actor: {d_hidden: 16}, critic: {d_hidden: 16, num_critics: 2}}
    logging: {plots: false}
"""
STAGE = Path("runs/online-kills/stages/train")


def _run(tmp_path: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml"],
        cwd=tmp_path,
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_killed_online_training_resumes_without_losing_or_repeating_data(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    rng = random.Random(0)
    killed_at = []
    for _ in range(2):
        proc = _run(tmp_path)
        deadline = time.monotonic() + 120
        while not (tmp_path / STAGE / "checkpoints/latest/state.json").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 1.0))
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        state = json.loads((tmp_path / STAGE / "checkpoints/latest/state.json").read_text())["state"]
        killed_at.append((proc.returncode, state["epoch"]))
    assert all(code == -signal.SIGKILL and epoch < 6 for code, epoch in killed_at), killed_at  # killed mid-run
    final = _run(tmp_path)
    out, err = final.communicate(timeout=300)
    assert final.returncode == 0, out + err
    store = TrajectoryStore.open(tmp_path / "store.zarr")
    assert verify_store(store).ok
    epochs = [int(s.attrs[EPOCH_ATTR]) for s in store.segments("fifo") if s.attrs.get(RUN_ATTR)]
    assert sorted(epochs) == list(range(6)), epochs  # one writer session per epoch: none lost, none twice
    run_id = json.loads((tmp_path / STAGE.parents[1] / "pipeline.lock.json").read_text())["run_id"]
    assert {s.attrs.get(RUN_ID_ATTR) for s in store.segments("fifo")} == {run_id}  # the id survived two resumes
    state = json.loads((tmp_path / STAGE / "checkpoints/latest/state.json").read_text())["state"]
    assert state["epoch"] == 6 and state["online"]["env_steps"] == 6 * 40
    assert state["online"]["exploration"]["timesteps"] == 6 * 40
