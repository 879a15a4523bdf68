"""What the config, the registered envs and the store's DataSpec already tell is checked before anything runs, through
the real CLI: `validate` for the config alone, `plan` and the start of `run` for the rest. A refused run writes nothing
(no run directory, no store). Each of these mistakes used to surface only after the stages before it ran."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

import pytest
from unit.data.learning_data import make_store

from amago_pipe.hashing import hash_json
from amago_pipe.store import TrajectoryStore

TINY = """\
    max_seq_len: 8
    batch_size: 8
    epochs: 2
    updates_per_epoch: 5
    warmup_steps: 2
    model:
      tstep_encoder: {type: ff, d_hidden: 16, d_output: 16}
      traj_encoder: {type: ff, d_model: 16}
    agent: {type: agent, actor: {d_hidden: 16}, critic: {d_hidden: 16, num_critics: 2}}
    logging: {plots: false}
"""
COLLECTED = f"""\
version: 1
name: pre
store: store.zarr
stages:
  collect:
    type: collect
    env: {{id: CartPole-v1, n_envs: 2}}
    policies: [{{policy: {{type: random}}, episodes: 6}}]
  train:
    type: train
{TINY}
  eval:
    type: evaluate
    env: {{id: CartPole-v1, n_envs: 2}}
    episodes: 2
    plots: false
  export:
    type: export
    verify_episodes: 1
"""
OFFLINE = f"""\
version: 1
name: pre
store: store.zarr
stages:
  train:
    type: train
    needs: []
{TINY}
  eval:
    type: evaluate
    env: {{id: CartPole-v1, n_envs: 2}}
    episodes: 2
"""


def write(tmp_path: Path, text: str) -> str:
    (tmp_path / "p.yaml").write_text(text)
    return "p.yaml"


def refused(amago: Any, tmp_path: Path, command: str, *args: str, code: int = 2) -> str:
    """Run `command p.yaml ARGS`, expect exit `code` without a traceback; the output. Nothing may be written."""
    proc = amago(command, "p.yaml", *args)
    out = proc.stdout + proc.stderr
    assert proc.returncode == code, out
    assert "Traceback" not in out, out
    assert not (tmp_path / "runs").exists(), list((tmp_path / "runs").rglob("*"))
    return out


def test_validate_names_each_wrong_stage_reference_with_file_and_line(amago: Any, tmp_path: Path) -> None:
    text = COLLECTED.replace("  eval:\n", "  eval:\n    baseline: train\n")
    text = text.replace("    type: export\n", "    type: export\n    train_stage: trian\n")
    write(tmp_path, text.replace("    type: train\n", "    type: train\n    init_from: {stage: train}\n"))
    out = refused(amago, tmp_path, "validate")
    assert "p.yaml:11: stages.train.init_from.stage: 'train' is this stage itself; name another, earlier train " in out
    assert "p.yaml:24: stages.eval.baseline: 'train' is a train stage; baseline compares with an earlier " in out
    assert "p.yaml:31: stages.export.train_stage: unknown stage 'trian' (stages: collect, train, eval, export); " in out
    assert "did you mean 'train'?" in out


def test_an_eval_env_unlike_the_stores_data_is_refused_before_training(amago: Any, tmp_path: Path) -> None:
    make_store(tmp_path / "store.zarr", "discrete", episodes=6)  # observation (3,), discrete(3) actions
    before = TrajectoryStore.open(tmp_path / "store.zarr").fingerprint()
    write(tmp_path, OFFLINE)
    assert amago("validate", "p.yaml").returncode == 0  # the config alone is fine
    for command in ("plan", "run"):
        out = refused(amago, tmp_path, command)
        assert (
            "stages.eval.env: env 'CartPole-v1' does not match the training data's data spec: observations"
            "['observation']: training data has shape (3,) float32, env 'CartPole-v1' has shape (4,) float32; "
            "action: training data has discrete(3), env 'CartPole-v1' has discrete(2); the training data is the "
            "store at store.zarr; use an env with the data's observation and action spaces" in out
        ), out
    assert TrajectoryStore.open(tmp_path / "store.zarr").fingerprint() == before


def test_eval_and_validation_envs_unlike_the_collect_env_are_refused_before_collecting(
    amago: Any, tmp_path: Path
) -> None:
    text = COLLECTED.replace("    env: {id: CartPole-v1, n_envs: 2}\n    episodes: 2", "    env: {id: Pendulum-v1}")
    write(tmp_path, text.replace("    logging:", "    validate: {env: {id: Pendulum-v1, n_envs: 2}}\n    logging:"))
    out = refused(amago, tmp_path, "run")
    data = "the training data is what stage 'collect' collects (stages.collect.env: 'CartPole-v1')"
    assert "stages.train.validate.env: env 'Pendulum-v1' does not match the training data's data spec: " in out
    assert "stages.eval.env: env 'Pendulum-v1' does not match the training data's data spec: " in out
    assert "action: training data has discrete(2), env 'Pendulum-v1' has continuous(1,); " + data in out
    assert not (tmp_path / "store.zarr").exists()


def test_conservative_coeff_is_refused_for_continuous_actions(amago: Any, tmp_path: Path) -> None:
    write(
        tmp_path,
        OFFLINE.replace("{type: agent,", "{type: agent, conservative_coeff: 0.5,").replace("CartPole", "Pendulum"),
    )
    assert amago("validate", "p.yaml").returncode == 0
    make_store(tmp_path / "store.zarr", "continuous", episodes=6)  # continuous(2,) actions
    out = refused(amago, tmp_path, "run")
    assert (
        "stages.train.agent.conservative_coeff: 0.5 needs discrete actions (a log-sum-exp over every action's Q), "
        "but the training data has continuous(2,) actions; the training data is the store at store.zarr; set "
        "conservative_coeff: 0" in out
    ), out


def test_conservative_coeff_is_refused_when_the_pipeline_collects_continuous_actions(
    amago: Any, tmp_path: Path
) -> None:
    text = COLLECTED.replace("{type: agent,", "{type: agent, conservative_coeff: 0.5,")
    write(tmp_path, text.replace("CartPole-v1", "Pendulum-v1"))
    out = refused(amago, tmp_path, "plan")
    assert "will run collect — never run" in out  # the plan is shown, then refused
    assert "but the training data has continuous(1,) actions; the training data is what stage 'collect' " in out


@pytest.mark.skipif(importlib.util.find_spec("flash_attn") is not None, reason="flash-attn is installed here")
def test_flash_attention_without_flash_attn_is_a_missing_dependency_at_plan_time(amago: Any, tmp_path: Path) -> None:
    flash = "      traj_encoder: {type: transformer, d_model: 16, n_heads: 2, n_layers: 1, attention: flash}"
    text = COLLECTED.replace("      traj_encoder: {type: ff, d_model: 16}", flash)
    write(tmp_path, text.replace("    logging:", "    mixed_precision: bf16\n    logging:"))
    assert amago("validate", "p.yaml").returncode == 0
    for command in ("plan", "run"):
        out = refused(amago, tmp_path, command, code=4)
        assert (
            "stages.train.model.traj_encoder.attention: 'flash' needs the flash-attn package, which cannot be "
            "imported here (No module named 'flash_attn'); pip install flash-attn --no-build-isolation" in out
        ), out
    assert not (tmp_path / "store.zarr").exists()


def test_a_typod_env_id_gets_a_did_you_mean(amago: Any, tmp_path: Path) -> None:
    write(
        tmp_path,
        COLLECTED.replace(
            "    env: {id: CartPole-v1, n_envs: 2}\n    episodes", "    env: {id: CartPol-v1}\n    episodes"
        ),
    )
    out = refused(amago, tmp_path, "validate")
    assert "p.yaml:24: stages.eval.env.id: unknown gymnasium env 'CartPol-v1'; did you mean 'CartPole-v1'?" in out
    module_id = "gymnasium.envs.classic_control:CartPol-v1"  # registered by importing a module: told by `plan`
    write(
        tmp_path,
        COLLECTED.replace("{id: CartPole-v1, n_envs: 2}\n    policies", f'{{id: "{module_id}"}}\n    policies'),
    )
    assert amago("validate", "p.yaml").returncode == 0
    out = refused(amago, tmp_path, "run")
    assert f"stages.collect.env.id: unknown gymnasium env '{module_id}'; did you mean 'CartPole-v1'?" in out


def test_a_typod_popgym_id_is_told_at_plan_time(amago: Any, tmp_path: Path) -> None:
    pytest.importorskip("popgym")
    write(tmp_path, COLLECTED.replace("CartPole-v1", "popgym/RepeatFirstEsy-v0"))
    assert amago("validate", "p.yaml").returncode == 0  # registering popgym's ids is left to plan
    out = refused(amago, tmp_path, "plan")
    assert "stages.collect.env.id: unknown gymnasium env 'popgym/RepeatFirstEsy-v0'; did you mean " in out
    assert "'popgym/RepeatFirstEasy-v0'?" in out and "stages.eval.env.id: unknown gymnasium env" in out


def test_a_logging_only_change_reruns_nothing(amago: Any, tmp_path: Path) -> None:
    write(tmp_path, COLLECTED)
    first = amago("run", "p.yaml")
    assert first.returncode == 0, first.stdout + first.stderr
    lock_path = tmp_path / "runs/pre/pipeline.lock.json"
    before = json.loads(lock_path.read_text())["stages"]
    report = tmp_path / "runs/pre/stages/eval/report.json"
    stamp = report.stat().st_mtime_ns
    logging = ["--set", "stages.train.logging={log_interval: 3, plots: true, console_interval: 9.0}"]
    again = amago("run", "p.yaml", *logging, "--set", "stages.train.prefetch=2")
    assert again.returncode == 0, again.stdout + again.stderr
    assert (
        "skip train — unchanged (logging.console_interval, logging.log_interval, logging.plots, prefetch: changes "
        "nothing it hands on; applies when it next runs)" in again.stdout
    ), again.stdout
    assert "skip eval — unchanged" in again.stdout and "skip export — unchanged" in again.stdout
    after = json.loads(lock_path.read_text())["stages"]
    for name in ("train", "eval", "export"):
        assert after[name]["output_hash"] == before[name]["output_hash"]
        assert after[name]["config_hash"] == before[name]["config_hash"]
    assert report.stat().st_mtime_ns == stamp
    lock = json.loads(lock_path.read_text())  # a record as amago-pipe wrote it before: every key in the hash
    lock["stages"]["train"]["config_hash"] = hash_json(lock["stages"]["train"]["config"])
    lock_path.write_text(json.dumps(lock))
    assert "skip train — unchanged" in amago("plan", "p.yaml").stdout
    changed = amago("plan", "p.yaml", *logging, "--set", "stages.train.lr=0.001").stdout
    assert "will restart train — config changed (lr)" in changed and "will run eval — upstream 'train'" in changed
