"""Helpers for CLI subprocesses in tests: their environment (the test stage plugins importable, wandb off), waiting on a run."""

from __future__ import annotations

import os
import time
from pathlib import Path

TESTS_DIR = Path(__file__).parent


def cli_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS_DIR), env.get("PYTHONPATH", "")])
    env.setdefault("WANDB_MODE", "disabled")
    env["COLUMNS"] = "200"
    return env


def wait_for_progress(tmp_path: Path, at_least: int = 5) -> int:
    """Poll the `demo` pipeline's stage b (a paced test stage) until it has done `at_least` steps; its count."""
    progress = tmp_path / "runs/demo/stages/b/progress.txt"
    deadline = time.time() + 60
    while time.time() < deadline:
        text = progress.read_text() if progress.exists() else ""  # read once: the stage rewrites it meanwhile
        if text and int(text) >= at_least:
            return int(text)
        time.sleep(0.05)
    raise AssertionError("stage b never made progress")


def toy_online_pipeline(
    *, name: str, own: int, epochs: int, updates: int, env: str = "amago_pipe.envs.toy:make_toy_env", extra: str = ""
) -> str:
    """A tiny online train stage on the toy env (GRU, a FIFO partition in `store.zarr`): the text of a pipeline file.

    `own`: the learner's own env steps per epoch (0: only followers collect); `extra`: more train-stage lines."""
    return f"""
version: 1
name: {name}
store: {{path: store.zarr, partitions: {{fifo: {{capacity_timesteps: 100000}}}}}}
stages:
  train:
    type: train
    partitions: {{fifo: 1.0}}
    online:
      env: {{factory: "{env}", kwargs: {{min_len: 4, max_len: 9}}, n_envs: 2}}
      timesteps_per_epoch: {own}
    max_seq_len: 6
    batch_size: 4
    epochs: {epochs}
    updates_per_epoch: {updates}
    warmup_steps: 1
{extra}    model:
      tstep_encoder: {{type: ff, d_hidden: 16, d_output: 16}}
      traj_encoder: {{type: gru, d_model: 16, n_layers: 1}}
    agent: {{type: agent, actor: {{d_hidden: 16}}, critic: {{d_hidden: 16, num_critics: 2}}}}
    logging: {{plots: false}}
"""
