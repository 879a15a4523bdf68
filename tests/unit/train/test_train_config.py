"""The train and evaluate stage configs through the pipeline loader: defaults, plugins and precise errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from amago_pipe.config import auto
from amago_pipe.config.build import build_strict
from amago_pipe.config.evaluate import EvaluateStageConfig
from amago_pipe.config.loader import load_pipeline
from amago_pipe.config.train import AgentConfig, MultiTaskConfig, TrainStageConfig
from amago_pipe.errors import ConfigError

PIPELINE = """
version: 1
name: t
store: s.zarr
stages:
  train:
    type: train
    needs: []
{train}
  eval:
    type: evaluate
    env: {{id: CartPole-v1}}
{evaluate}
"""


def _load(tmp_path: Path, train: str = "", evaluate: str = "", overrides: tuple[str, ...] = ()):
    path = tmp_path / "p.yaml"
    path.write_text(PIPELINE.format(train=train, evaluate=evaluate))
    return load_pipeline(path, overrides).config


def test_defaults_and_agent_types(tmp_path: Path) -> None:
    cfg = _load(tmp_path)
    train = cfg.stages["train"]
    assert isinstance(train, TrainStageConfig) and type(train.agent) is AgentConfig
    assert train.agent.all_gammas == (0.9, 0.99, 0.999) and train.partitions == {"protected": 1.0}
    assert isinstance(cfg.stages["eval"], EvaluateStageConfig) and cfg.stages["eval"].checkpoint == "latest"
    multi = _load(tmp_path, overrides=("stages.train.agent={type: multitask, labels: hl_gauss}",)).stages["train"]
    assert isinstance(multi.agent, MultiTaskConfig) and multi.agent.critic.output == "bins"
    assert multi.agent.online_coeff == 0.0 and multi.agent.offline_coeff == 1.0
    epoch = _load(tmp_path, evaluate="    checkpoint: 3").stages["eval"]
    assert epoch.checkpoint == 3


@pytest.mark.parametrize(
    ("train", "message"),
    [
        ("    agent: {type: agnet}", r"stages.train.agent.type: unknown agent 'agnet' .*did you mean 'agent'\?"),
        ("    partitions: {protected: -1.0}", r"stages.train.partitions.protected: mixture weights must be >= 0"),
        ("    partitions: {}", r"stages.train.partitions: give at least one partition"),
        ("    agent: {type: agent, gamma: 1.5}", r"stages.train.agent.gamma: discount factors must be in \(0, 1\)"),
        (
            "    agent: {type: agent, gammas: [0.9, 0.999]}",
            r"stages.train.agent.gammas: lists the main gamma 0.999 again",
        ),
        ("    agent: {type: agent, online_coeff: 0.0, offline_coeff: 0.0}", r"both 0: the actor would not learn"),
        (
            "    agent: {type: multitask, critic: {output: scalar}}",
            r"the multitask agent needs `critic: {output: bins}`",
        ),
        (
            "    agent: {type: agent, filter: {type: soft}}",
            r"stages.train.agent.filter.type: unknown bc_filter 'soft' \(known: binary, exp, leaky\)",
        ),
        (
            "    agent: {type: agent, filter: {type: exp, scale_max: 0}}",
            r"stages.train.agent.filter.scale_max: must be a positive number or null, got 0",
        ),
        (
            "    agent: {type: agent, filter: {type: exp, scale_max: 10, normalize: true}}",
            r"stages.train.agent.filter.scale_max: has no effect with normalize: true",
        ),
        ("    max_seq_len: 0", r"stages.train.max_seq_len: must be at least 1, got 0"),
        ("    mixed_precision: fp16", r"stages.train.mixed_precision: expected one of 'no', 'bf16'"),
        ("    validate: {episodes: 3}", r"stages.train.validate.env: missing required key 'env'"),
        (
            "    validate: {env: {id: CartPole-v1}, patience: 0}",
            r"stages.train.validate.patience: must be at least 1, got 0",
        ),
        (
            "    agent: {type: agent, actor_trains_model: 1.5}",
            r"stages.train.agent.actor_trains_model: must be true, false or a number in \[0, 1\], got 1.5",
        ),
        (
            "    agent: {type: agent, history_coeff: -1}",
            r"stages.train.agent.history_coeff: must be at least 0.0, got -1",
        ),
        (
            "    agent: {type: agent, history_coeff: .nan}",
            r"stages.train.agent.history_coeff: must be at least 0.0, got nan",
        ),
        ("    model_lr_scale: 0", r"stages.train.model_lr_scale: must be 'auto' or in \(0, 100\], got 0"),
        ("    model_lr_scale: .nan", r"stages.train.model_lr_scale: must be 'auto' or in \(0, 100\], got nan"),
        (
            "    agent: {type: agent, actor_trains_model: half}",
            r"stages.train.agent.actor_trains_model: expected a boolean \(true/false\) or a number, got 'half'",
        ),
    ],
)
def test_bad_train_configs_name_the_key(tmp_path: Path, train: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, train=train)


@pytest.mark.parametrize(
    ("evaluate", "message"),
    [
        ("    checkpoint: bestt", r"stages.eval.checkpoint: expected one of 'latest', 'best' or an integer"),
        ("    checkpoint: 0", r"stages.eval.checkpoint: epoch numbers start at 1"),
        ("    episodes: 0", r"stages.eval.episodes: must be at least 1"),
        ("    checkpoint: best", r"stages.eval.checkpoint: `best` .* train stage 'train' has no `validate:`; add"),
    ],
)
def test_bad_evaluate_configs_name_the_key(tmp_path: Path, evaluate: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, evaluate=evaluate)


def test_best_checkpoint_passes_when_the_train_stage_validates(tmp_path: Path) -> None:
    validate = "    validate: {env: {id: CartPole-v1}, episodes: 2}"
    assert _load(tmp_path, train=validate, evaluate="    checkpoint: best").stages["eval"].checkpoint == "best"


@pytest.mark.parametrize(
    ("traj", "scale", "expected"),
    [
        ("transformer", "auto", 1.0),
        ("ff", "auto", 1.0),
        ("gru", "auto", 10.0),
        ("mamba", "auto", 10.0),
        ("gru", 2, 2.0),
    ],
)
def test_model_lr_scale_auto_speeds_up_recurrent_sequence_models_only(traj: str, scale, expected: float) -> None:
    cfg = build_strict(
        TrainStageConfig, {"type": "train", "model": {"traj_encoder": {"type": traj}}, "model_lr_scale": scale}
    )
    assert auto.model_lr_scale(cfg) == expected


@pytest.mark.parametrize(
    ("agent", "expected"),
    [
        ({"type": "agent"}, "min"),
        ({"type": "agent", "online_coeff": 0.0}, "mean"),
        ({"type": "multitask"}, "mean"),
        ({"type": "multitask", "online_coeff": 1.0}, "mean"),  # written: `targets: {reduce: mean}` is its default
        ({"type": "agent", "targets": {"reduce": "mean"}}, "mean"),
    ],
)
def test_td_reduce_auto_is_min_while_the_policy_gradient_is_on(agent: dict[str, object], expected: str) -> None:
    assert auto.td_reduce(build_strict(AgentConfig, agent)) == expected


def test_every_auto_setting_is_reported_with_what_it_became() -> None:
    cfg = build_strict(TrainStageConfig, {"type": "train", "model": {"traj_encoder": {"type": "gru"}}})
    values = auto.resolved(cfg, reward_multiplier=2.5)
    assert values == {"reward_multiplier": 2.5, "td_reduce": "min", "model_lr_scale": 10.0}
    assert auto.describe(cfg, values) == "reward_multiplier 2.5 (auto), td_reduce min (auto), model_lr_scale 10 (auto)"
    fixed = build_strict(
        TrainStageConfig, {"type": "train", "model_lr_scale": 3, "agent": {"type": "agent", "reward_multiplier": 1}}
    )
    assert auto.describe(fixed, auto.resolved(fixed, reward_multiplier=1.0)).endswith("model_lr_scale 3")
    assert auto.reward_multiplier(None) == 10.0 and auto.reward_multiplier(3.0) == 3.33
