"""A train stage killed (SIGKILL) mid-way and resumed by `amago-pipe run` ends bit-identical to a straight run."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_support import cli_env
from safetensors.torch import load_file
from unit.data.learning_data import make_store

PIPELINE = """
version: 1
name: resume
store: store.zarr
stages:
  train:
    type: train
    needs: []
    max_seq_len: 8
    batch_size: 8
    epochs: 4
    updates_per_epoch: 40
    warmup_steps: 5
    deterministic: true
    ckpt_interval: 1
    model:
      tstep_encoder: {type: ff, d_hidden: 32, d_output: 32}
      traj_encoder: {type: transformer, d_model: 32, n_heads: 2, n_layers: 1}
    agent: {type: agent, actor: {d_hidden: 32}, critic: {d_hidden: 32, num_critics: 2}, policy_average: 0.05}
    logging: {plots: false}
"""


def _run(tmp_path: Path, run_dir: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml", "--run-dir", run_dir],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


@pytest.mark.slow
def test_sigkill_then_resume_is_bit_identical(tmp_path: Path) -> None:
    make_store(tmp_path / "store.zarr", "discrete", episodes=12)
    (tmp_path / "p.yaml").write_text(PIPELINE)
    straight = _run(tmp_path, "straight")
    assert straight.wait(timeout=600) == 0, straight.stdout.read() if straight.stdout else ""

    victim = _run(tmp_path, "killed")
    state = tmp_path / "killed/stages/train/checkpoints/latest/state.json"
    deadline = time.time() + 300
    while time.time() < deadline:
        if state.exists() and json.loads(state.read_text())["state"]["epoch"] >= 2:
            break
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    assert json.loads(state.read_text())["state"]["epoch"] < 4, "the run finished before it could be killed"

    resumed = _run(tmp_path, "killed")
    out = resumed.communicate(timeout=600)[0]
    assert resumed.returncode == 0, out
    assert "resume train" in out and "interrupted" in out, out
    a = load_file(str(tmp_path / "straight/stages/train/checkpoints/latest/model.safetensors"))
    b = load_file(str(tmp_path / "killed/stages/train/checkpoints/latest/model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
