"""Checkpoints under hostile conditions, with real processes: SIGKILLs at random moments of a training run (and
in the middle of its checkpoint writes), and a full disk (RLIMIT_FSIZE: writes past the limit fail with EFBIG)."""

from __future__ import annotations

import json
import os
import random
import resource
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

from amago_pipe.config.nets import ActorHeadConfig, CriticHeadConfig, FFTstepConfig, GruConfig, ModelConfig
from amago_pipe.config.train import AgentConfig, LoggingConfig, TrainStageConfig
from amago_pipe.train import checkpoint as ckpt
from amago_pipe.train.learner import Learner, LearnerHooks

PIPELINE = """
version: 1
name: kills
store: store.zarr
stages:
  train:
    type: train
    needs: []
    max_seq_len: 8
    batch_size: 8
    epochs: {epochs}
    updates_per_epoch: {updates}
    warmup_steps: 2
    deterministic: true
    ckpt_interval: 1
    keep_last: 100
    model:
      tstep_encoder: {{type: ff, d_hidden: {width}, d_output: {width}}}
      traj_encoder: {{type: gru, d_model: {width}, n_layers: 1}}
    agent: {{type: agent, actor: {{d_hidden: {width}}}, critic: {{d_hidden: {width}, num_critics: 2}}}}
    logging: {{plots: false}}
"""
STAGE = Path("stages/train")


def _pipeline(tmp_path: Path, *, epochs: int, updates: int, width: int) -> None:
    make_store(tmp_path / "store.zarr", "discrete", episodes=12)
    (tmp_path / "p.yaml").write_text(PIPELINE.format(epochs=epochs, updates=updates, width=width))


def _limit_file_size(limit: int) -> object:
    def apply() -> None:  # a full disk without root: a write past `limit` bytes fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def _cli(tmp_path: Path, *args: str, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", *args],
        cwd=tmp_path,
        env={**cli_env(), "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_limit_file_size(limit) if limit else None,
    )


def _debris(stage_dir: Path) -> list[str]:
    return sorted(
        p.name
        for d in ("checkpoints", "policy")
        if (stage_dir / d).is_dir()
        for p in (stage_dir / d).iterdir()
        if p.name.startswith(".tmp-")
    )


def _epoch_of(directory: Path) -> int:
    return ckpt.load_checkpoint(directory).state.epoch


# ---- a full disk ------------------------------------------------------------------------------


def test_disk_full_during_a_checkpoint_exits_3_naming_it_and_keeps_the_previous_one(tmp_path: Path) -> None:
    _pipeline(tmp_path, epochs=2, updates=3, width=32)
    text = (tmp_path / "p.yaml").read_text()  # without the policy average the model file is the smaller one
    (tmp_path / "p.yaml").write_text(text.replace("num_critics: 2}}", "num_critics: 2}, policy_average: 0}"))
    assert _cli(tmp_path, "run", "p.yaml").returncode == 0
    stage = tmp_path / "runs/kills" / STAGE
    latest = stage / "checkpoints/latest"
    before = {p.name: p.read_bytes() for p in latest.iterdir()}
    model_bytes = (latest / "model.safetensors").stat().st_size
    optimizer_bytes = (latest / "optimizer.safetensors").stat().st_size
    assert model_bytes < optimizer_bytes

    # the policy weights and the model fit, the optimiser state does not: the save fails half-way
    proc = _cli(tmp_path, "run", "p.yaml", "--set", "stages.train.epochs=4", limit=(model_bytes + optimizer_bytes) // 2)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert errors == [
        f"error: stage 'train' failed: runs/kills/{STAGE}/checkpoints/epoch_0003: out of space while writing "
        "(file size limit reached); free some disk space (or raise the quota / file-size limit) and run again"
    ], proc.stderr
    assert "Traceback" not in proc.stderr
    assert _debris(stage) == []
    assert sorted(p.name for p in (stage / "checkpoints").iterdir()) == ["epoch_0001", "epoch_0002", "latest"]
    assert {p.name: p.read_bytes() for p in latest.iterdir()} == before

    # the first write of a run (its lock) fails: the path is named, nothing half-written stays
    proc = _cli(tmp_path, "run", "p.yaml", "--run-dir", "other", limit=20)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: other/.run.lock: out of space while writing (file size limit reached)")
    assert len(proc.stderr.splitlines()) == 1 and not [
        p for p in (tmp_path / "other").iterdir() if p.name.startswith(".tmp-")
    ]


PLUGIN = '''
from amago_pipe.config.base import config
from amago_pipe.config.stages import StageConfig
from amago_pipe.pipeline.stage import Stage


@config
class BigConfig(StageConfig):
    """Writes `size` bytes."""

    size: int = 1
    """Bytes written to big.bin."""


class Big(Stage):
    Config = BigConfig

    def run(self):
        (self.ctx.out_dir / "big.bin").write_bytes(b"x" * self.config.size)
'''


def test_a_stage_crashing_on_a_full_disk_exits_3_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "big_stage.py").write_text(PLUGIN)
    (tmp_path / "p.yaml").write_text("version: 1\nname: big\nstages:\n  big: {type: 'big_stage:Big', size: 200000}\n")
    env = {**cli_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path), cli_env()["PYTHONPATH"]])}
    proc = subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size(100_000),
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith(("error:", "  "))]
    assert errors == [
        "error: stage 'big' crashed: OSError: [Errno 27] File too large; free some disk space (or raise the quota / "
        "file-size limit) and run again"
    ], proc.stderr


SAVE_UNDER_LIMIT = """
import sys
from pathlib import Path
import torch
from amago_pipe.errors import AmagoPipeError
from amago_pipe.train import checkpoint as ckpt

root = Path(sys.argv[1])
big = torch.nn.Linear(400, 400)  # ~0.6 MB of weights: over the limit
for name in ("latest", "epoch_0002"):
    try:
        ckpt.save_checkpoint(root / name, model=big.state_dict(), optimizer=torch.optim.AdamW(big.parameters()).state_dict(),
                             scheduler={}, state=ckpt.TrainingState(epoch=2), meta={})
    except AmagoPipeError as e:
        print(type(e).__name__, e.exit_code, e)
try:
    ckpt.save_weights(root / "policy.safetensors", big.state_dict(), {})
except AmagoPipeError as e:
    print(type(e).__name__, e.exit_code, e)
"""


def test_out_of_space_in_the_checkpoint_functions_leaves_nothing_half_written(tmp_path: Path) -> None:
    small = torch.nn.Linear(2, 2)
    ckpt.save_checkpoint(
        tmp_path / "latest",
        model=small.state_dict(),
        optimizer=torch.optim.AdamW(small.parameters()).state_dict(),
        scheduler={},
        state=ckpt.TrainingState(epoch=1),
        meta={},
    )
    (tmp_path / "policy.safetensors").write_bytes(b"old")
    before = {p.name: p.read_bytes() for p in (tmp_path / "latest").iterdir()}
    proc = subprocess.run(
        [sys.executable, "-c", SAVE_UNDER_LIMIT, str(tmp_path)],
        capture_output=True,
        text=True,
        preexec_fn=_limit_file_size(100_000),
    )
    hint = "free some disk space (or raise the quota / file-size limit) and run again"
    assert proc.stdout.splitlines() == [
        f"OutOfSpaceError 3 {tmp_path / 'latest'}: out of space while writing (file size limit reached); "
        f"the previous version is kept; {hint}",
        f"OutOfSpaceError 3 {tmp_path / 'epoch_0002'}: out of space while writing (file size limit reached); {hint}",
        f"OutOfSpaceError 3 {tmp_path / 'policy.safetensors'}: out of space while writing (file size limit reached); "
        f"the previous version is kept; {hint}",
    ], proc.stdout + proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest", "policy.safetensors"]
    assert {p.name: p.read_bytes() for p in (tmp_path / "latest").iterdir()} == before
    assert (tmp_path / "policy.safetensors").read_bytes() == b"old"


# ---- kills ------------------------------------------------------------------------------------


def test_resume_removes_what_a_killed_save_left(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.zarr", "discrete", episodes=6)
    cfg = TrainStageConfig(
        max_seq_len=8,
        batch_size=4,
        epochs=1,
        updates_per_epoch=2,
        model=ModelConfig(tstep_encoder=FFTstepConfig(d_hidden=8, d_output=8), traj_encoder=GruConfig(d_model=8)),
        agent=AgentConfig(actor=ActorHeadConfig(d_hidden=8), critic=CriticHeadConfig(d_hidden=8, num_critics=2)),
        logging=LoggingConfig(plots=False),
    )  # type: ignore[call-arg]
    out = tmp_path / "train"
    Learner(cfg, store, out, seed=0, hooks=LearnerHooks()).run()
    dead = subprocess.Popen(["true"])
    dead.wait()
    for planted in (out / f"checkpoints/.tmp-latest-{dead.pid}", out / f"checkpoints/.tmp-epoch_0002-{dead.pid}"):
        planted.mkdir()
        (planted / "model.safetensors").write_bytes(b"\0" * 1000)
    (out / f"policy/.tmp-latest.safetensors-{dead.pid}").write_bytes(b"\0" * 1000)
    learner = Learner(cfg, store, out, seed=0, hooks=LearnerHooks())
    assert learner.resume() and learner.state.epoch == 1
    assert _debris(out) == []


def _kill_when(victim: subprocess.Popen[str], stage: Path, mode: str, rng: random.Random) -> str:
    """SIGKILL `victim` while it writes its n-th (1 to 3) `latest` or `epoch_*` checkpoint (when the poll catches
    it), or at a random moment up to 1 s after its first save began; returns "killed" or "finished"."""
    prefix = ".tmp-" + (mode if mode != "random" else "")
    nth = rng.randint(1, 3) if mode != "random" else 1
    folder, writing, writes = stage / "checkpoints", False, 0
    while writes < nth and victim.poll() is None:  # a busy poll: a write takes milliseconds
        names = os.listdir(folder) if folder.is_dir() else []
        now = any(n.startswith(prefix) and n.endswith(f"-{victim.pid}") for n in names)
        writes, writing = writes + (now and not writing), now
    if mode == "random":
        time.sleep(rng.uniform(0.0, 1.0))
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=60)
    return "finished" if victim.returncode == 0 else "killed"


@pytest.mark.slow
def test_random_sigkills_cost_at_most_the_checkpoint_being_written(tmp_path: Path) -> None:
    epochs = 30
    _pipeline(tmp_path, epochs=epochs, updates=2, width=192)  # ~7 MB per checkpoint: most of the time is saving
    straight = _cli(tmp_path, "run", "p.yaml", "--run-dir", "straight")
    assert straight.returncode == 0, straight.stdout + straight.stderr
    stage = tmp_path / "killed" / STAGE
    rng = random.Random(0)
    outcomes = []
    for mode in ["epoch_", "latest", "random", "epoch_", "random", "latest", "epoch_", "random", "random"]:
        victim = subprocess.Popen(
            [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml", "--run-dir", "killed"],
            cwd=tmp_path,
            env={**cli_env(), "OMP_NUM_THREADS": "1"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        outcomes.append(_kill_when(victim, stage, mode, rng))
        # whatever the moment, every checkpoint on disk is complete (a kill loses at most the one being written)
        found = ckpt.resolve(stage / "checkpoints" / ckpt.LATEST)
        if found is not None:
            assert 0 < _epoch_of(found) <= epochs
        for directory in (stage / "checkpoints").glob("epoch_*"):
            assert _epoch_of(directory) == int(directory.name.split("_")[1])
        for weights in (stage / "policy").glob("*.safetensors"):
            load_file(str(weights))
    assert outcomes.count("killed") >= 6, outcomes

    final = _cli(tmp_path, "run", "p.yaml", "--run-dir", "killed")
    assert final.returncode == 0, final.stdout + final.stderr
    assert _debris(stage) == []
    epoch_dirs = sorted(p.name for p in (stage / "checkpoints").iterdir() if not p.name.startswith(".tmp-"))
    assert epoch_dirs == [f"epoch_{e:04d}" for e in range(1, epochs + 1)] + ["latest"]
    for name in epoch_dirs:
        a = load_file(str(tmp_path / "straight" / STAGE / "checkpoints" / name / "model.safetensors"))
        b = load_file(str(stage / "checkpoints" / name / "model.safetensors"))
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), name
    assert json.loads((stage / "checkpoints/latest/state.json").read_text())["state"]["epoch"] == epochs
