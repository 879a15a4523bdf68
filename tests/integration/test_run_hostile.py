"""The run engine under hostile use, with real processes: racing stale-lock takeovers, config changes on an
interrupted or finished training, and wandb writing into the train stage's folder."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from cli_support import cli_env
from safetensors.torch import load_file
from unit.data.learning_data import make_store

TAKE_LOCKS = """
import json, sys, time
from pathlib import Path
from amago_pipe.errors import LockError
from amago_pipe.pipeline.lockfile import RunLock

root, t0, tries, gap = Path(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
won = []
for i in range(tries):
    target = t0 + i * gap
    time.sleep(max(0.0, target - time.time() - 0.003))
    while time.time() < target:
        pass
    try:
        RunLock(root / f"run{i}").acquire()  # never released: a winner keeps the lock
        won.append(i)
    except LockError:
        pass
print(json.dumps(won))
"""


@pytest.mark.slow
def test_racing_takeovers_of_a_stale_lock_have_exactly_one_winner(tmp_path: Path) -> None:
    tries, gap = 200, 0.04
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    for i in range(tries):
        run_dir = tmp_path / f"run{i}"
        run_dir.mkdir()
        (run_dir / ".run.lock").write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "started": 0}))
    t0 = time.time() + 3.0
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", TAKE_LOCKS, str(tmp_path), str(t0), str(tries), str(gap)],
            env=cli_env(),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    wins = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    winners = [sum(i in w for w in wins) for i in range(tries)]
    assert winners == [1] * tries, f"{sum(n != 1 for n in winners)} of {tries} takeovers had {set(winners)} winners"


TRAIN = """
version: 1
name: hostile
store: store.zarr
stages:
  train:
    type: train
    needs: []
    max_seq_len: 8
    batch_size: 8
    epochs: 12
    updates_per_epoch: 10
    warmup_steps: 5
    deterministic: true
    ckpt_interval: 1
    model:
      tstep_encoder: {type: ff, d_hidden: 16, d_output: 16}
      traj_encoder: {type: ff, d_model: 16}
    agent: {type: agent, actor: {d_hidden: 16}, critic: {d_hidden: 16, num_critics: 2}}
    logging: {plots: false}
"""


def _cli(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, "-m", "amago_pipe.cli", *args],
        cwd=tmp_path,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _state(run_dir: Path) -> dict:
    path = run_dir / "stages/train/checkpoints/latest/state.json"
    return json.loads(path.read_text())["state"] if path.exists() else {}


def _weights(run_dir: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "stages/train/checkpoints/latest/model.safetensors"))


@pytest.mark.slow
def test_train_resumes_after_safe_changes_continues_raised_epochs_and_moves_aside_on_model_change(
    tmp_path: Path,
) -> None:
    make_store(tmp_path / "store.zarr", "discrete", episodes=12)
    (tmp_path / "p.yaml").write_text(TRAIN)
    log7, epochs14 = ("--set", "stages.train.logging.log_interval=7"), ("--set", "stages.train.epochs=14")
    _cli(tmp_path, "run", "p.yaml", "--run-dir", "straight", *log7, *epochs14)

    victim = subprocess.Popen(
        [sys.executable, "-m", "amago_pipe.cli", "run", "p.yaml", "--run-dir", "killed"],
        cwd=tmp_path,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while _state(tmp_path / "killed").get("epoch", 0) < 2 and time.time() < deadline:
        time.sleep(0.02)
    victim.send_signal(signal.SIGTERM)
    assert victim.wait(timeout=60) == 143, victim.communicate()[1]
    epoch = _state(tmp_path / "killed")["epoch"]
    assert 2 <= epoch < 12

    plan = _cli(tmp_path, "plan", "p.yaml", "--run-dir", "killed", *log7).stdout
    assert f"will resume train from epoch {epoch} — interrupted; changed: logging.log_interval" in plan, plan
    out = _cli(tmp_path, "run", "p.yaml", "--run-dir", "killed", *log7).stdout
    assert f"resume train from epoch {epoch}" in out
    rows = [json.loads(line) for line in (tmp_path / "killed/stages/train/metrics.jsonl").read_text().splitlines()]
    assert rows[0]["epoch"] == 1 and rows[-1]["epoch"] == 12  # one continuous history, not a restart

    plan = _cli(tmp_path, "plan", "p.yaml", "--run-dir", "killed", *log7, *epochs14).stdout
    assert "will resume train from epoch 12 — changed: epochs" in plan, plan
    _cli(tmp_path, "run", "p.yaml", "--run-dir", "killed", *log7, *epochs14)
    assert _state(tmp_path / "killed")["epoch"] == 14
    straight, continued = _weights(tmp_path / "straight"), _weights(tmp_path / "killed")
    assert straight.keys() == continued.keys() and all(torch.equal(straight[k], continued[k]) for k in straight)

    plan = _cli(tmp_path, "plan", "p.yaml", "--run-dir", "killed", *log7, "--set", "stages.train.epochs=10").stdout
    assert "will restart train — epochs 10 is below the 14 epochs its checkpoint has trained" in plan, plan

    d_model = ("--set", "stages.train.model.traj_encoder.d_model=24")
    plan = _cli(tmp_path, "plan", "p.yaml", "--run-dir", "killed", *log7, *epochs14, *d_model).stdout
    assert (
        "will restart train — config changed (model.traj_encoder.d_model); old outputs moved to "
        "killed/superseded/train.1" in plan
    ), plan
    _cli(tmp_path, "run", "p.yaml", "--run-dir", "killed", *log7, *epochs14, *d_model)
    old = json.loads((tmp_path / "killed/superseded/train.1/checkpoints/latest/state.json").read_text())
    assert old["state"]["epoch"] == 14 and old["meta"]["model"]["traj_encoder"]["d_model"] == 16
    assert _state(tmp_path / "killed")["epoch"] == 14
    assert _weights(tmp_path / "killed").keys() == straight.keys()


@pytest.mark.slow
@pytest.mark.parametrize("wandb_dir", [None, "wandb-files"])
def test_wandb_files_do_not_change_the_train_stage_identity(tmp_path: Path, wandb_dir: str | None) -> None:
    pytest.importorskip("wandb")
    make_store(tmp_path / "store.zarr", "discrete", episodes=12)
    (tmp_path / "p.yaml").write_text(
        TRAIN.replace("epochs: 12", "epochs: 2").replace("{plots: false}", "{plots: false, wandb: offline}")
    )
    env = {**cli_env(), "WANDB_MODE": "offline", "WANDB_SILENT": "true"}
    env.pop("WANDB_DIR", None)
    if wandb_dir:
        (tmp_path / wandb_dir).mkdir()
        env["WANDB_DIR"] = str(tmp_path / wandb_dir)
    _cli(tmp_path, "run", "p.yaml", env=env)
    files_root = tmp_path / wandb_dir if wandb_dir else tmp_path / "runs/hostile/stages/train"
    runs = list(files_root.glob("wandb/offline-run-*/run-*.wandb"))
    assert len(runs) == 1, list(files_root.rglob("*"))
    log = runs[0].read_bytes()
    assert all(f"{section}/*".encode() in log for section in ("train", "val", "buffer"))  # define_metric globs
    second = _cli(tmp_path, "run", "p.yaml", env=env).stdout
    assert "skip train — unchanged" in second, second
