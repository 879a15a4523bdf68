"""Online training with real envs, a real store and the real learner: collection into the fifo partition,
exact resume (data collected after the checkpoint is dropped), warm starts and the bad inputs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from amago_pipe.config.build import build_strict
from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import ConfigError, DataError
from amago_pipe.store import TrajectoryStore
from amago_pipe.train.learner import Learner, LearnerHooks
from amago_pipe.train.online import EPOCH_ATTR, RUN_ATTR

TOY = "amago_pipe.envs.toy:make_toy_env"


def config(**over: object) -> TrainStageConfig:
    data: dict = {
        "type": "train",
        "partitions": {"fifo": 1.0},
        "online": {"env": {"factory": TOY, "kwargs": {"min_len": 4, "max_len": 9}, "n_envs": 2},
                   "timesteps_per_epoch": 40},
        "max_seq_len": 6, "batch_size": 3, "epochs": 3, "updates_per_epoch": 2, "warmup_steps": 1,
        "model": {"tstep_encoder": {"type": "ff", "d_hidden": 8, "d_output": 8},
                  "traj_encoder": {"type": "gru", "d_model": 8, "n_layers": 1}},
        "agent": {"type": "agent", "actor": {"d_hidden": 8}, "critic": {"d_hidden": 8, "num_critics": 2}},
        "deterministic": True, "prefetch": 1, "logging": {"log_interval": 1, "plots": False},
    }  # fmt: skip
    data.update(over)
    return build_strict(TrainStageConfig, data)


def store_for(path: Path) -> TrajectoryStore:
    from amago_pipe.config.envs import EnvConfig
    from amago_pipe.envs.vector import make_batched_env

    with make_batched_env(EnvConfig(factory=TOY, n_envs=1)) as env:
        return TrajectoryStore.create(path, env.spec)


@pytest.fixture(autouse=True)
def _restore_determinism():
    yield
    torch.use_deterministic_algorithms(False)


def online_segments(store: TrajectoryStore) -> list[tuple[int, int]]:
    return [(int(s.attrs[EPOCH_ATTR]), s.timesteps) for s in store.segments("fifo") if s.attrs.get(RUN_ATTR) == "t"]


def test_online_from_scratch_collects_every_epoch_and_trains_on_it(tmp_path: Path) -> None:
    store = store_for(tmp_path / "s.zarr")
    metrics = Learner(config(), store, tmp_path / "out", seed=0, hooks=LearnerHooks(run_name="t")).run()
    assert metrics["epochs"] == 3 and metrics["steps"] == 6 and metrics["env_steps"] == 120
    assert sorted({e for e, _ in online_segments(store)}) == [0, 1, 2]
    rows = [json.loads(line) for line in (tmp_path / "out/metrics.jsonl").read_text().splitlines()]
    online = [r for r in rows if "online/env_steps" in r]
    assert [r["online/env_steps"] for r in online] == [40, 80, 120] and all(r["buffer/fifo_timesteps"] for r in online)
    state = json.loads((tmp_path / "out/checkpoints/latest/state.json").read_text())["state"]["online"]
    assert state["env_steps"] == 120 and state["exploration"]["timesteps"] == 120
    episodes = list(store.iter_episodes("fifo"))
    assert {ep.meta["policy_version"] for ep in episodes} == {0, 1, 2} and all(
        ep.source == "online:t" for ep in episodes
    )


def test_resume_drops_what_was_collected_after_the_checkpoint(tmp_path: Path) -> None:
    store = store_for(tmp_path / "s.zarr")
    hooks = LearnerHooks(run_name="t")
    Learner(config(epochs=2), store, tmp_path / "out", seed=0, hooks=hooks).run()
    killed = Learner(config(epochs=3), store, tmp_path / "out", seed=0, hooks=hooks)
    assert killed.resume()
    killed._start_collector()  # a run killed after collecting epoch 3 and before its checkpoint
    assert killed.collector is not None
    killed.collector.collect(2, lambda: None)
    killed.collector.close()
    assert sorted({e for e, _ in online_segments(store)}) == [0, 1, 2]
    resumed = Learner(config(epochs=3), store, tmp_path / "out", seed=0, hooks=hooks)
    assert resumed.resume() and resumed.state.epoch == 2
    resumed.run()
    per_epoch = [e for e, _ in online_segments(store)]
    assert sorted(set(per_epoch)) == [0, 1, 2] and per_epoch.count(2) == 1  # the orphan was dropped, not kept
    state = json.loads((tmp_path / "out/checkpoints/latest/state.json").read_text())["state"]["online"]
    assert state["env_steps"] == 120  # counted once


def test_offline_then_online_with_a_warm_start(tmp_path: Path) -> None:
    store = store_for(tmp_path / "s.zarr")
    averaged = {"type": "agent", "actor": {"d_hidden": 8}, "critic": {"d_hidden": 8, "num_critics": 2},
                "policy_average": 0.5}  # fmt: skip
    pre = config(epochs=1, agent=averaged)
    Learner(pre, store, tmp_path / "pre", seed=0, hooks=LearnerHooks(run_name="pre")).run()
    with store.writer("protected") as w:  # some offline data, so epoch 0 can train before collecting
        for ep in list(store.iter_episodes("fifo"))[:4]:
            w.add(ep)
    cfg = config(
        partitions={"protected": 1.0, "fifo": 1.0},
        online={"env": {"factory": TOY, "n_envs": 2}, "timesteps_per_epoch": 20, "start_at_epoch": 1},
        epochs=2,
    )
    learner = Learner(cfg, store, tmp_path / "tune", seed=1, hooks=LearnerHooks(run_name="tune"))
    before = {k: v.clone() for k, v in learner.agent.state_dict().items()}
    learner.load_weights(tmp_path / "pre/checkpoints/latest", ["model", "actor"])
    after = learner.agent.state_dict()
    changed = {k.split(".")[0] for k in before if not torch.equal(before[k], after[k])}
    assert changed - {"policy_avg"} == {"model", "actor", "target_actor"}  # the critic (and its target) start fresh
    source = load_file(str(tmp_path / "pre/checkpoints/latest/model.safetensors"))
    copied = [k for k in after if k.startswith(("model.", "actor."))]
    assert any(not torch.equal(source[k], source[f"policy_avg.{k}"]) for k in copied)  # the two can be told apart
    for k in copied:  # the source's policy average: the policy its stage evaluated
        torch.testing.assert_close(after[k], source[f"policy_avg.{k}"])
    learner.load_weights(tmp_path / "pre/policy/latest.safetensors", ["model", "actor"])  # a policy file too
    learner.run()
    tagged = [s for s in store.segments("fifo") if s.attrs.get(RUN_ATTR) == "tune"]
    assert {int(s.attrs[EPOCH_ATTR]) for s in tagged} == {1}  # epoch 0 trained on protected only
    critic_copy = Learner(cfg, store, tmp_path / "c", seed=1, hooks=LearnerHooks(run_name="c"))
    critic_copy.load_weights(tmp_path / "pre/checkpoints/latest", ["critic"])  # `auto`: the source's fixed value
    assert float(critic_copy.agent.reward_multiplier) == float(source["reward_multiplier"]) > 0
    other = config(model={"tstep_encoder": {"type": "ff", "d_hidden": 8, "d_output": 8},
                          "traj_encoder": {"type": "gru", "d_model": 12, "n_layers": 1}})  # fmt: skip
    wrong = Learner(other, store, tmp_path / "w", seed=0, hooks=LearnerHooks(run_name="w"))
    with pytest.raises(DataError, match=r"init_from: .* written by a model of another shape"):
        wrong.load_weights(tmp_path / "pre/checkpoints/latest", ["model"])


def test_bad_online_settings_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    store = store_for(tmp_path / "s.zarr")
    cartpole = config(online={"env": {"id": "CartPole-v1", "n_envs": 1}})
    with pytest.raises(DataError, match=r"online.env"):
        Learner(cartpole, store, tmp_path / "a", seed=0, hooks=LearnerHooks(run_name="a")).run()
    assert "fifo" not in store.partitions() and not (tmp_path / "a/checkpoints").exists()
    with pytest.raises(ConfigError, match=r"online.partition: 'fifo' gets no weight"):
        config(partitions={"protected": 1.0})
    with pytest.raises(ConfigError, match=r"online.partition: collect into a fifo partition"):
        config(online={"env": {"factory": TOY}, "partition": "protected"}, partitions={"protected": 1.0})
    with pytest.raises(DataError, match=r"start_at_epoch: epochs before 1 would train"):
        Learner(config(online={"env": {"factory": TOY}, "start_at_epoch": 1}), store, tmp_path / "b", seed=0,
                hooks=LearnerHooks(run_name="b"))  # fmt: skip
    store.configure_partition("fifo", kind="fifo", capacity_timesteps=3)
    with pytest.raises(DataError, match=r"capacity_timesteps 3 is smaller than one episode .*online.save_every"):
        Learner(config(), store, tmp_path / "c", seed=0, hooks=LearnerHooks(run_name="c")).run()


def test_init_from_best_copies_the_validation_best_epoch_whole(amago, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parents[2]
    sizes = yaml.safe_load((repo / "tests/smoke/smoke_overrides.yaml").read_text())["offline-to-online.yaml"]
    smoke = [arg for item in sizes for arg in ("--set", item)]
    pipeline = str(repo / "pipelines/offline-to-online.yaml")
    best = ["--set", "stages.online.init_from.which=best", "--set", "stages.offline.epochs=3", "--until", "online"]
    validate = ["--set", "stages.offline.validate={env: {id: CartPole-v1, n_envs: 2}, episodes: 2, every: 1}"]
    done = amago(
        "run", pipeline, *smoke, *best, *validate, "--run-dir", "run", "--set", "store=run/store.zarr", timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    offline = tmp_path / "run/stages/offline"
    summary = json.loads((offline / "train_summary.json").read_text())
    state = json.loads((offline / "checkpoints/best/state.json").read_text())["state"]
    assert state["epoch"] == summary["best_epoch"] and state["best"]["epoch"] == summary["best_epoch"]
    weights = load_file(str(offline / "checkpoints/best/model.safetensors"))
    assert any(k.startswith("critic.") for k in weights)  # the whole agent, so `parts` may name the critic

    refused = amago(
        "run", pipeline, *smoke, *best, "--run-dir", "again", "--set", "store=again/store.zarr", timeout=300
    )  # no validation: no best
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "stages.online.init_from.which: stage 'offline' has no best checkpoint" in refused.stderr
    assert not (tmp_path / "again/stages/online/checkpoints").exists()


SLOW_ENV = """
import time

from amago_pipe.envs.toy import ToyEnv


class SlowEnv(ToyEnv):
    def step(self, action):
        time.sleep(0.02)  # a real env's cost: the train lasts 10 s or more on any machine
        return super().step(action)


def make(**kwargs):
    return SlowEnv(**kwargs)
"""
SLOW_PIPELINE = """
version: 1
name: slow
store: store.zarr
stages:
  train:
    type: train
    partitions: {fifo: 1.0}
    online: {env: {factory: "slow_env:make", kwargs: {min_len: 4, max_len: 9}, n_envs: 1}, timesteps_per_epoch: 25}
    max_seq_len: 6
    batch_size: 3
    epochs: 20
    updates_per_epoch: 1
    warmup_steps: 1
    model:
      tstep_encoder: {type: ff, d_hidden: 8, d_output: 8}
      traj_encoder: {type: gru, d_model: 8, n_layers: 1}
    agent: {type: agent, actor: {d_hidden: 8}, critic: {d_hidden: 8, num_critics: 2}}
    logging: {plots: false}
"""


def test_a_piped_train_prints_progress_lines_to_the_console_and_stage_log(amago, tmp_path: Path) -> None:
    (tmp_path / "slow_env.py").write_text(SLOW_ENV)
    (tmp_path / "p.yaml").write_text(SLOW_PIPELINE)
    proc = amago("run", "p.yaml", check=True, timeout=300)  # stdout is a pipe, as under nohup, CI or slurm
    pattern = r"train train: \d+/20 steps \(\d+%\), [\d.,]+ steps/s, elapsed [\dhms.]+, ETA [\dhms.]+  epoch=\d+/20"
    printed = re.findall(rf"^    ({pattern}.*)$", proc.stdout, re.MULTILINE)
    assert printed, proc.stdout
    logged = re.findall(
        rf"INFO amago_pipe.progress: ({pattern}.*)$",
        (tmp_path / "runs/slow/stages/train/stage.log").read_text(),
        re.MULTILINE,
    )
    assert logged == printed
