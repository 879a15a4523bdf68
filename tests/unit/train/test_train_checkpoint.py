"""Checkpoints: full state round trip (no pickle), atomic replacement, shape checks, pruning, RNG restore."""

from __future__ import annotations

import json
import os
import random

import pytest
import torch

from amago_pipe.errors import DataError, StoreFormatError
from amago_pipe.train import checkpoint as ckpt
from amago_pipe.train.metrics import MetricsLogger, read_metrics
from amago_pipe.train.optim import lr_at, make_optimizer, set_lr


def _trained_optimizer() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 1))
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.1)
    for _ in range(2):
        model(torch.randn(5, 3)).square().mean().backward()
        opt.step()
        opt.zero_grad()
    return model, opt


def test_full_checkpoint_round_trip(tmp_path) -> None:
    model, opt = _trained_optimizer()
    state = ckpt.TrainingState(epoch=3, step=30, timesteps=900, wall_time=1.5, sampler={"next_index": 30})
    random.seed(5)
    torch.manual_seed(7)
    ckpt.save_checkpoint(
        tmp_path / "latest",
        model=model.state_dict(),
        optimizer=opt.state_dict(),
        scheduler={},
        state=state,
        meta={"a": 1},
    )
    expected_draw = torch.rand(3)
    expected_py = random.random()
    assert not list(tmp_path.glob(".tmp-*"))
    assert {p.name for p in (tmp_path / "latest").iterdir()} == {
        "model.safetensors",
        "optimizer.safetensors",
        "state.json",
    }
    loaded = ckpt.load_checkpoint(tmp_path / "latest")
    assert loaded.state.to_json() == state.to_json() and loaded.meta == {"a": 1}
    for k, v in model.state_dict().items():
        assert torch.equal(loaded.model[k], v)
    _model2, opt2 = _trained_optimizer()
    opt2.load_state_dict(loaded.optimizer)
    for s1, s2 in zip(opt.state_dict()["state"].values(), opt2.state_dict()["state"].values()):
        assert all(torch.equal(s1[k], s2[k]) for k in s1)
    assert opt2.param_groups[0]["betas"] == (0.9, 0.999)
    ckpt.set_rng_state(loaded.rng_tensors, loaded.rng_meta)
    assert torch.equal(torch.rand(3), expected_draw) and random.random() == expected_py


def test_replacing_a_checkpoint_keeps_a_readable_copy(tmp_path) -> None:
    model, opt = _trained_optimizer()
    kwargs = dict(model=model.state_dict(), optimizer=opt.state_dict(), scheduler={}, meta={})
    ckpt.save_checkpoint(tmp_path / "latest", state=ckpt.TrainingState(epoch=1), **kwargs)
    ckpt.save_checkpoint(tmp_path / "latest", state=ckpt.TrainingState(epoch=2), **kwargs)
    assert ckpt.load_checkpoint(tmp_path / "latest").state.epoch == 2
    # a crash between the two renames leaves only the old copy: it is still found
    os.replace(tmp_path / "latest", tmp_path / ".tmp-old-latest")
    assert ckpt.resolve(tmp_path / "latest") == tmp_path / ".tmp-old-latest"
    assert ckpt.load_checkpoint(tmp_path / "latest").state.epoch == 2


def test_missing_damaged_and_newer_checkpoints_are_clear_errors(tmp_path) -> None:
    with pytest.raises(StoreFormatError, match="no checkpoint here"):
        ckpt.load_checkpoint(tmp_path / "nothing")
    model, opt = _trained_optimizer()
    ckpt.save_checkpoint(
        tmp_path / "c",
        model=model.state_dict(),
        optimizer=opt.state_dict(),
        scheduler={},
        state=ckpt.TrainingState(),
        meta={},
    )
    doc = json.loads((tmp_path / "c" / "state.json").read_text())
    doc["format"] = ckpt.CHECKPOINT_FORMAT + 1
    (tmp_path / "c" / "state.json").write_text(json.dumps(doc))
    with pytest.raises(StoreFormatError, match="newer than this amago-pipe supports"):
        ckpt.load_checkpoint(tmp_path / "c")
    (tmp_path / "c" / "model.safetensors").write_bytes(b"garbage")
    with pytest.raises(StoreFormatError, match="damaged checkpoint"):
        ckpt.load_checkpoint(tmp_path / "c")


def test_check_shapes_names_the_differences() -> None:
    expected = {"a.weight": torch.zeros(4, 3), "b": torch.zeros(2)}
    ckpt.check_shapes(expected, {"a.weight": torch.ones(4, 3), "b": torch.ones(2)}, where="x")
    with pytest.raises(
        DataError, match=r"model of another shape: 1 weights differ in shape \(a.weight: checkpoint \(8, 3\)"
    ):
        ckpt.check_shapes(expected, {"a.weight": torch.zeros(8, 3), "b": torch.zeros(2)}, where="x")
    with pytest.raises(DataError, match=r"1 weights missing \(b\); 1 unexpected weights \(c\)"):
        ckpt.check_shapes(expected, {"a.weight": torch.zeros(4, 3), "c": torch.zeros(1)}, where="x")


def test_prune_keeps_the_newest(tmp_path) -> None:
    for e in range(1, 6):
        (tmp_path / f"epoch_{e:04d}.safetensors").write_bytes(b"x")
    deleted = ckpt.prune(tmp_path, "epoch_*.safetensors", 2)
    assert [p.name for p in deleted] == ["epoch_0001.safetensors", "epoch_0002.safetensors", "epoch_0003.safetensors"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["epoch_0004.safetensors", "epoch_0005.safetensors"]


def test_weight_decay_groups_and_warmup() -> None:
    _model, opt = _trained_optimizer()
    decay, no_decay = opt.param_groups
    assert decay["weight_decay"] == 0.1 and all(p.dim() == 2 for p in decay["params"])
    assert no_decay["weight_decay"] == 0.0 and all(p.dim() == 1 for p in no_decay["params"])
    assert lr_at(0, peak=1.0, warmup_steps=4) == 0.25 and lr_at(10, peak=1.0, warmup_steps=4) == 1.0
    assert lr_at(0, peak=1.0, warmup_steps=0) == 1.0


def test_scaled_parameters_learn_at_their_own_rate_through_warmup_and_resume() -> None:
    torch.manual_seed(0)
    model = torch.nn.ModuleDict({"model": torch.nn.Linear(3, 4), "head": torch.nn.Linear(4, 1)})
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.1, scaled=("model.",), scale=10.0)
    by_param = {id(p): g for g in opt.param_groups for p in g["params"]}
    assert by_param[id(model["model"].weight)]["lr"] == pytest.approx(1e-2)
    assert by_param[id(model["model"].bias)]["weight_decay"] == 0.0
    assert by_param[id(model["head"].weight)]["lr"] == pytest.approx(1e-3)
    set_lr(opt, lr_at(0, peak=1e-3, warmup_steps=4))
    assert by_param[id(model["model"].weight)]["lr"] == pytest.approx(2.5e-3)
    assert by_param[id(model["head"].bias)]["lr"] == pytest.approx(2.5e-4)
    twin = make_optimizer(model, lr=1e-3, weight_decay=0.1, scaled=("model.",), scale=10.0)
    twin.load_state_dict(opt.state_dict())  # a resumed run keeps each group's scale
    set_lr(twin, 1e-3)
    assert [g["lr"] for g in twin.param_groups] == pytest.approx([1e-3, 1e-3, 1e-2, 1e-2])
    unscaled = make_optimizer(model, lr=1e-3, weight_decay=0.1)  # scale 1: the two groups of before
    assert len(unscaled.param_groups) == 2


def test_metrics_logger_truncates_on_resume(tmp_path) -> None:
    logger = MetricsLogger(tmp_path)
    for step in (10, 20, 30):
        logger.log(
            {"train/loss": float(step), "train/nan": float("nan")}, step=step, epoch=1, timesteps=step, wall_time=0.1
        )
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"step": 40, "cut')  # a line cut by a kill
    assert logger.truncate_after(20) == 2
    rows = read_metrics(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [10, 20] and rows[0]["train/nan"] is None
