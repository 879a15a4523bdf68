"""What killed checkpoint writers leave behind is removed by the next save; deletes never leave half a checkpoint."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import torch

from amago_pipe.train import checkpoint as ckpt


def _dead_pid() -> int:
    """The pid of a process that has exited (and was reaped)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _save(directory: Path, epoch: int) -> None:
    model = torch.nn.Linear(4, 4)
    ckpt.save_checkpoint(
        directory,
        model=model.state_dict(),
        optimizer=torch.optim.AdamW(model.parameters()).state_dict(),
        scheduler={},
        state=ckpt.TrainingState(epoch=epoch),
        meta={},
    )


def _plant_writer_debris(folder: Path, name: str, pid: int) -> Path:
    """A half-written checkpoint folder as a writer killed mid-save leaves it."""
    tmp = folder / f".tmp-{name}-{pid}"
    tmp.mkdir(parents=True)
    (tmp / "model.safetensors").write_bytes(b"\0" * 1000)
    return tmp


def test_next_save_removes_what_dead_writers_left(tmp_path: Path) -> None:
    checkpoints, policy = tmp_path / "checkpoints", tmp_path / "policy"
    _save(checkpoints / "latest", 1)
    _save(checkpoints / "epoch_0001", 1)
    dead = _dead_pid()
    planted = [
        _plant_writer_debris(checkpoints, "latest", dead),
        _plant_writer_debris(checkpoints, "epoch_0002", dead),
        _plant_writer_debris(checkpoints, "epoch_0001", os.getpid()),  # this process, from a failed save
    ]
    _save(checkpoints / ".tmp-old-latest", 0)  # a crash after the new `latest` was in place
    live = subprocess.Popen(["sleep", "60"])
    try:
        busy = _plant_writer_debris(checkpoints, "epoch_0003", live.pid)  # a writer still at work
        policy.mkdir()
        (policy / f".tmp-latest.safetensors-{dead}").write_bytes(b"\0" * 100)
        (policy / "latest.safetensors").write_bytes(b"x")

        _save(checkpoints / "latest", 2)
        assert sorted(p.name for p in checkpoints.iterdir()) == [busy.name, "epoch_0001", "latest"]
        assert not any(p.exists() for p in planted)
        assert ckpt.load_checkpoint(checkpoints / "latest").state.epoch == 2

        ckpt.save_weights(policy / "latest.safetensors", {"w": torch.zeros(2)}, {})
        assert sorted(p.name for p in policy.iterdir()) == ["latest.safetensors"]
    finally:
        live.kill()
        live.wait()
    assert ckpt.clean_debris(checkpoints) == [busy]


def test_an_old_copy_whose_replacement_never_arrived_is_kept_until_replaced(tmp_path: Path) -> None:
    _save(tmp_path / "latest", 1)
    _save(tmp_path / "latest", 2)
    os.replace(tmp_path / "latest", tmp_path / ".tmp-old-latest")  # killed between the two renames
    assert ckpt.clean_debris(tmp_path) == []
    assert ckpt.load_checkpoint(tmp_path / "latest").state.epoch == 2
    _save(tmp_path / "latest", 3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]
    assert ckpt.load_checkpoint(tmp_path / "latest").state.epoch == 3


def test_prune_never_leaves_a_half_deleted_checkpoint(tmp_path: Path) -> None:
    for epoch in (1, 2, 3):
        _save(tmp_path / f"epoch_{epoch:04d}", epoch)
    assert [p.name for p in ckpt.prune(tmp_path, "epoch_*", 1)] == ["epoch_0001", "epoch_0002"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch_0003"]
