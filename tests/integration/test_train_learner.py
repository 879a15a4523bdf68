"""Store -> batches -> updates -> checkpoints with real pieces: exact resume, outputs, and every bad input."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from unit.data.learning_data import make_episode, make_spec, make_store

from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.nets import (
    ActorHeadConfig,
    CriticHeadConfig,
    FFTstepConfig,
    GruConfig,
    ModelConfig,
    ObsKeyConfig,
)
from amago_pipe.config.online import PartitionPhase
from amago_pipe.config.train import AgentConfig, LoggingConfig, MultiTaskConfig, TrainStageConfig, ValidateConfig
from amago_pipe.errors import ConfigError, DataError, Interrupted
from amago_pipe.spec import DataSpec
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.train.learner import Learner, LearnerHooks, NonFiniteLoss
from amago_pipe.train.policy_loading import load_policy, policy_path

TINY = ModelConfig(
    tstep_encoder=FFTstepConfig(d_hidden=16, d_output=16), traj_encoder=GruConfig(d_model=16, n_layers=1)
)


def _cfg(**overrides: object) -> TrainStageConfig:
    base = dict(
        max_seq_len=8,
        batch_size=4,
        epochs=3,
        updates_per_epoch=4,
        warmup_steps=2,
        model=TINY,
        agent=AgentConfig(actor=ActorHeadConfig(d_hidden=16), critic=CriticHeadConfig(d_hidden=16, num_critics=2)),
        ckpt_interval=2,
        keep_last=2,
        deterministic=True,
        prefetch=2,
        logging=LoggingConfig(log_interval=2, plots=False),
    )
    base.update(overrides)
    return TrainStageConfig(**base)  # type: ignore[arg-type]


def _final_weights(out: Path) -> dict[str, torch.Tensor]:
    return load_file(str(out / "checkpoints" / "latest" / "model.safetensors"))


@pytest.fixture(autouse=True)
def _restore_determinism():
    yield
    torch.use_deterministic_algorithms(False)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory):
    return make_store(tmp_path_factory.mktemp("store") / "s.zarr", "discrete", episodes=10)


def test_training_writes_checkpoints_policies_and_metrics(
    store, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    out = tmp_path / "train"
    with caplog.at_level(logging.INFO, logger="amago_pipe"):
        metrics = Learner(
            _cfg(logging=LoggingConfig(log_interval=2, plots=True)), store, out, seed=1, hooks=LearnerHooks()
        ).run()
    assert metrics["steps"] == 12 and metrics["epochs"] == 3 and metrics["critic_loss"] is not None
    assert metrics["reward_multiplier"] == 10.0  # `auto` on rewards of 0 and 1
    assert metrics["td_reduce"] == "min" and metrics["model_lr_scale"] == 10.0  # `auto`: online_coeff 1, a GRU
    assert "auto settings resolved: reward_multiplier 10 (auto), td_reduce min (auto), model_lr_scale 10 (auto)" in (
        caplog.text
    )
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["epoch_0002", "epoch_0003", "latest"]
    assert sorted(p.name for p in (out / "policy").iterdir()) == [
        "epoch_0002.safetensors",
        "epoch_0003.safetensors",
        "latest.safetensors",
    ]
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert {"step", "epoch", "timesteps", "wall_time"} <= set(rows[0])
    assert any("train/critic_loss" in r for r in rows) and any("buffer/protected_timesteps" in r for r in rows)
    assert (out / "plots" / "losses.png").stat().st_size > 1000
    policy = load_policy(policy_path(out, "latest"))
    policy.reset(2)
    actions = policy.act(
        {"observation": np.zeros((2, 3), np.float32)}, np.zeros((2, 4), np.float32), np.zeros(2, np.int64)
    )
    assert actions.shape == (2,) and actions.dtype == np.int64


def test_interrupted_then_resumed_run_is_bit_identical(store, tmp_path: Path) -> None:
    cfg = _cfg()
    Learner(cfg, store, tmp_path / "straight", seed=3, hooks=LearnerHooks()).run()

    steps = {"n": 0}

    def stop_mid_epoch_two() -> None:
        steps["n"] += 1
        if steps["n"] == 7:  # epoch 1 = steps 1-4 is checkpointed; die inside epoch 2
            raise Interrupted("stopped for the test")

    with pytest.raises(Interrupted):
        Learner(cfg, store, tmp_path / "resumed", seed=3, hooks=LearnerHooks(check_stop=stop_mid_epoch_two)).run()
    learner = Learner(cfg, store, tmp_path / "resumed", seed=3, hooks=LearnerHooks())
    assert learner.resume() and learner.state.epoch == 1 and learner.state.step == 4
    learner.run()
    a, b = _final_weights(tmp_path / "straight"), _final_weights(tmp_path / "resumed")
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a), [k for k in a if not torch.equal(a[k], b[k])][:5]
    steps_logged = [json.loads(r)["step"] for r in (tmp_path / "resumed" / "metrics.jsonl").read_text().splitlines()]
    assert steps_logged == sorted(steps_logged)  # the redone steps were not logged twice


def _patience_run(store, out: Path, returns: dict[int, float], patience: int, **overrides: object) -> dict:
    """A 7-epoch run validated every epoch with scripted returns, resumed from `out` when it holds a checkpoint."""
    validate = ValidateConfig(env=EnvConfig(id="CartPole-v1"), every=1, patience=patience)
    hooks = LearnerHooks(validate=lambda agent, epoch: {"return_mean": returns[epoch]})
    learner = Learner(_cfg(epochs=7, validate=validate, **overrides), store, out, seed=0, hooks=hooks)
    learner.resume()
    return learner.run()


def test_patience_stops_after_validations_without_a_new_best_and_a_resume_keeps_it(store, tmp_path: Path) -> None:
    returns = {1: 0.5, 2: 0.9, 3: 0.9, 4: 0.2, 5: 0.95, 6: 0.1, 7: 0.1}
    summary = _patience_run(store, tmp_path, returns, patience=2, ckpt_interval=3)  # 3 (a tie) and 4 miss 2's best
    assert summary["stopped_early"] == 4 and summary["epochs"] == 4 and summary["best_epoch"] == 2
    assert summary["steps"] == 16
    kept = sorted(p.name for p in (tmp_path / "checkpoints").iterdir())
    assert kept == ["best", "epoch_0003", "epoch_0004", "latest"]  # the stop epoch's checkpoint as the last one
    summary = _patience_run(store, tmp_path, returns, patience=2, ckpt_interval=3)  # the same config: done
    assert summary["stopped_early"] == 4 and summary["steps"] == 16
    summary = _patience_run(store, tmp_path, returns, patience=3, ckpt_interval=3)  # 5 beats the best; 6, 7 do not
    assert "stopped_early" not in summary and summary["epochs"] == 7 and summary["best_epoch"] == 5


def test_rank_by_success_keeps_the_most_successful_training_validation(store, tmp_path: Path) -> None:
    def summary(ret: float, success: float, held_out_success: float) -> dict:
        training = {"return_mean": ret, "success_rate": success}
        return {"return_mean": ret, "success_rate": (success + held_out_success) / 2, "training": training}

    runs = {1: summary(9.0, 0.1, 0.1), 2: summary(1.0, 0.6, 0.0), 3: summary(1.0, 0.2, 1.0)}
    validate = ValidateConfig(env=EnvConfig(id="CartPole-v1"), every=1, rank_by="success")
    hooks = LearnerHooks(validate=lambda agent, epoch: runs[epoch])
    result = Learner(_cfg(epochs=3, validate=validate), store, tmp_path / "s", seed=0, hooks=hooks).run()
    assert result["best_epoch"] == 2 and result["best_val_success"] == 0.6  # not 1's return, not 3's held-out tasks
    no_flag = LearnerHooks(validate=lambda agent, epoch: {"return_mean": 1.0})
    with pytest.raises(DataError, match=r"validate\.rank_by: success, but the validation env reports no success"):
        Learner(_cfg(epochs=1, validate=validate), store, tmp_path / "n", seed=0, hooks=no_flag).run()


def test_patience_counts_only_after_the_last_change_of_training_data(store, tmp_path: Path) -> None:
    returns = {1: 1.0, 2: 0.0, 3: 0.0, 4: 0.0, 5: 0.0, 6: 0.0, 7: 0.0}
    assert _patience_run(store, tmp_path / "plain", returns, patience=1)["stopped_early"] == 2
    phase = PartitionPhase(from_epoch=3, weights={"protected": 1.0})  # epoch 4 (1-based) trains on the new mixture
    summary = _patience_run(store, tmp_path / "phased", returns, patience=1, partition_schedule=[phase])
    assert summary["stopped_early"] == 4 and summary["best_epoch"] == 1


def test_resuming_with_another_model_shape_is_refused(store, tmp_path: Path) -> None:
    Learner(_cfg(epochs=1), store, tmp_path, seed=0, hooks=LearnerHooks()).run()
    before = (tmp_path / "checkpoints" / "latest" / "model.safetensors").read_bytes()
    bigger = dataclasses.replace(TINY, traj_encoder=GruConfig(d_model=32, n_layers=1))
    learner = Learner(_cfg(epochs=2, model=bigger), store, tmp_path, seed=0, hooks=LearnerHooks())
    with pytest.raises(DataError, match=r"written by a model of another shape: .*traj_encoder"):
        learner.resume()
    assert (tmp_path / "checkpoints" / "latest" / "model.safetensors").read_bytes() == before


def test_non_finite_loss_names_the_step_and_the_last_good_checkpoint(tmp_path: Path) -> None:
    store = make_store(tmp_path / "s.zarr", "discrete", episodes=4)
    spec = make_spec("discrete")
    rng = np.random.default_rng(0)
    with store.writer("poison") as writer:
        obs = rng.normal(size=(11, 3)).astype(np.float32)
        writer.add(
            Episode(
                obs={"observation": obs},
                actions=np.zeros(10, np.int64),
                rewards=np.full(10, np.nan, np.float32),
                terminated=np.eye(10, dtype=bool)[-1],
                truncated=np.zeros(10, bool),
            )
        )
    assert store.spec == spec
    cfg = _cfg(partitions={"protected": 1.0}, epochs=2)
    Learner(cfg, store, tmp_path / "out", seed=0, hooks=LearnerHooks()).run()
    good = (tmp_path / "out" / "checkpoints" / "latest" / "model.safetensors").read_bytes()
    poisoned = _cfg(partitions={"poison": 1.0}, epochs=3)
    learner = Learner(poisoned, store, tmp_path / "out", seed=0, hooks=LearnerHooks())
    learner.resume()
    with pytest.raises(
        NonFiniteLoss,
        match=r"non-finite loss \(critic nan, actor nan, history nan\) at gradient step 9 \(epoch 3\).*last good checkpoint is "
        r".*latest \(epoch 2\)",
    ):
        learner.run()
    assert (tmp_path / "out" / "checkpoints" / "latest" / "model.safetensors").read_bytes() == good


def test_missing_and_empty_partitions_are_refused(store, tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"stages.train.partitions: the store has no partition 'fifo'"):
        Learner(_cfg(partitions={"fifo": 1.0}), store, tmp_path, seed=0, hooks=LearnerHooks())
    store.configure_partition("nothing", kind="plain")
    with pytest.raises(DataError, match=r"partition\(s\) 'nothing' hold no episodes"):
        Learner(_cfg(partitions={"nothing": 1.0}), store, tmp_path, seed=0, hooks=LearnerHooks())


def test_config_inconsistent_with_the_data_spec_is_refused(store, tmp_path: Path) -> None:
    wrong_key = dataclasses.replace(TINY, tstep_encoder=FFTstepConfig(keys={"pixels": ObsKeyConfig(use="ignore")}))
    with pytest.raises(ConfigError, match=r"unknown observation key 'pixels' \(the data has: observation\)"):
        Learner(_cfg(model=wrong_key), store, tmp_path, seed=0, hooks=LearnerHooks())
    with pytest.raises(FieldError, match="the multitask agent needs `critic: {output: bins}`"):
        MultiTaskConfig(critic=CriticHeadConfig(output="scalar"))


def test_policy_refuses_an_env_unlike_its_training_data(store, tmp_path: Path) -> None:
    Learner(_cfg(epochs=1), store, tmp_path, seed=0, hooks=LearnerHooks()).run()
    from amago_pipe.config.envs import EnvConfig
    from amago_pipe.train.policy_loading import load_agent
    from amago_pipe.train.validation import run_episodes

    agent, _ = load_agent(policy_path(tmp_path, "latest"))
    with pytest.raises(
        DataError, match=r"env 'CartPole-v1' does not match the training data's data spec: .*observations"
    ):
        run_episodes(
            agent, EnvConfig(id="CartPole-v1", n_envs=1), 1, spec=agent.spec, greedy=True, seed=0, where="eval"
        )
    with pytest.raises(DataError, match=r"no 'best' policy .*needs `validate:`.*available: epoch_0001, latest"):
        policy_path(tmp_path, "best")


def test_checkpoint_policy_factory_for_collect(store, tmp_path: Path) -> None:
    from amago_pipe.config.policies import policy_config
    from amago_pipe.envs.policies import PolicyContext, make_policy

    Learner(_cfg(epochs=1), store, tmp_path / "train", seed=0, hooks=LearnerHooks()).run()
    ctx = PolicyContext(spec=store.spec, n_envs=2, upstream={"train": tmp_path / "train"}, where="stages.c.policies.0")
    policy = make_policy(policy_config({"type": "checkpoint", "stage": "train", "which": "latest"}), ctx)
    policy.reset(2)
    assert policy.act(
        {"observation": np.zeros((2, 3), np.float32)}, np.zeros((2, 4), np.float32), np.zeros(2, np.int64)
    ).shape == (2,)
    assert make_policy(policy_config(f"checkpoint:{tmp_path / 'train/policy/epoch_0001.safetensors'}"), ctx)
    with pytest.raises(ConfigError, match=r"\.stage: stage 'trian' is not among this stage's needs \(train\)"):
        make_policy(policy_config("checkpoint:trian"), ctx)
    with pytest.raises(DataError, match=r"no '7' policy in .*; available: epoch_0001, latest"):
        make_policy(policy_config("checkpoint:train:7"), ctx)


def test_gradient_accumulation_counts_micro_batches(store, tmp_path: Path) -> None:
    metrics = Learner(_cfg(epochs=1, grad_accum=2), store, tmp_path, seed=0, hooks=LearnerHooks()).run()
    assert metrics["steps"] == 4 and metrics["timesteps"] == 4 * 2 * 4 * 8  # steps x micro-batches x B x L
    state = json.loads((tmp_path / "checkpoints" / "latest" / "state.json").read_text())
    assert state["state"]["sampler"]["next_index"] == 8


@pytest.mark.parametrize("scale", ["auto", 1.0])
def test_the_sequence_model_and_history_head_learn_at_model_lr_scale(store, tmp_path: Path, scale) -> None:
    cfg = _cfg(epochs=1, updates_per_epoch=3, warmup_steps=1, model_lr_scale=scale)  # TINY is a GRU: auto = 10
    learner = Learner(cfg, store, tmp_path / "train", seed=0, hooks=LearnerHooks())
    learner.run()
    lr_of = {id(p): g["lr"] for g in learner.optimizer.param_groups for p in g["params"]}
    trained = {name: p for name, p in learner.agent.named_parameters() if p.requires_grad}
    assert any(n.startswith("history.") for n in trained) and any(n.startswith("critic.") for n in trained)
    fast = 10.0 if scale == "auto" else 1.0
    for name, p in trained.items():
        expected = cfg.lr * (fast if name.startswith(("model.", "history.")) else 1.0)
        assert lr_of[id(p)] == pytest.approx(expected), name


def test_popart_per_task_keeps_a_value_scale_per_task_and_resumes_only_with_the_same_tasks(tmp_path: Path) -> None:
    """Two tasks whose rewards differ 1000-fold: the agent keeps one PopArt statistic per task (recorded in the
    checkpoint and logged per task); a resume over data holding a third task is refused, naming the tasks."""
    spec = make_spec("discrete")
    store = _store_with_tasks(tmp_path / "s.zarr", spec, {"small": 1.0, "big": 1000.0})
    agent = dataclasses.replace(_cfg().agent, popart_per_task=True, reward_multiplier=1.0)
    out = tmp_path / "train"
    Learner(_cfg(epochs=2, agent=agent), store, out, seed=0, hooks=LearnerHooks()).run()
    meta = json.loads((out / "checkpoints/latest/state.json").read_text())
    assert meta["meta"]["tasks"] == ["big", "small"]
    weights = _final_weights(out)
    sigma = (weights["popart.nu"] - weights["popart.mu"].square()).sqrt()  # (T, G)
    assert weights["popart.mu"].shape == (2, 3) and bool((sigma[0] > 50 * sigma[1]).all()), sigma
    rows = [json.loads(r) for r in (out / "metrics.jsonl").read_text().splitlines()]
    assert any("train/popart_sigma/big" in r and "train/popart_sigma/small" in r for r in rows)
    resumed = Learner(_cfg(epochs=3, agent=agent), store, out, seed=0, hooks=LearnerHooks())
    assert resumed.resume()
    with store.writer("protected") as w:
        w.add(dataclasses.replace(make_episode(spec, 10, np.random.default_rng(9)), env_name="third"))
    with pytest.raises(
        DataError, match=r"tasks \['big', 'small'\], but the data .* now have \['big', 'small', 'third'\]"
    ):
        Learner(_cfg(epochs=3, agent=agent), store, out, seed=0, hooks=LearnerHooks()).resume()


def _store_with_tasks(path: Path, spec: DataSpec, scales: dict[str, float]) -> TrajectoryStore:
    """Six random episodes per task, the task's rewards multiplied by its scale."""
    store = TrajectoryStore.create(path, spec)
    rng = np.random.default_rng(0)
    with store.writer("protected") as w:
        for name, scale in scales.items():
            for _ in range(6):
                ep = make_episode(spec, int(rng.integers(10, 30)), rng)
                w.add(dataclasses.replace(ep, env_name=name, rewards=ep.rewards * scale + scale))
    return store
