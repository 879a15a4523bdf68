"""The flat `agent:` keys of before the typed blocks (2026-12-01): the metadata of older checkpoints and policy files translates to the same agent
(`upgrade_flat_agent`), YAML is refused with the new form (tests/unit/config/test_hostile_messages.py)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from amago_pipe.config.agent import AgentConfig, LeakyFilterConfig, MultiTaskConfig
from amago_pipe.config.agent_moved import upgrade_flat_agent
from amago_pipe.config.base import to_dict
from amago_pipe.config.build import Problems, build, build_strict
from amago_pipe.config.stages import StageConfig
from amago_pipe.config.train import TrainStageConfig

ACTOR = {"d_hidden": 256, "n_layers": 2, "activation": "leaky_relu", "dropout": 0.0,
         "continuous_dist": "tanh_gaussian", "gmm_components": 5, "log_std_min": -5.0, "log_std_max": 2.0}  # fmt: skip
CRITIC = {"num_critics": 4, "d_hidden": 256, "n_layers": 2, "activation": "leaky_relu", "output": "scalar",
          "num_bins": 128, "symlog_low": -20.0, "symlog_high": 20.0, "discrete_as_continuous": False}  # fmt: skip
OLD_AGENT: dict[str, Any] = {
    "type": "agent", "gamma": 0.999, "gammas": [0.9, 0.99], "actor": ACTOR, "critic": CRITIC,
    "num_critics_td": 2, "td_reduce": "auto", "online_coeff": 1.0, "offline_coeff": 1.0, "fbc_filter": "exp",
    "filter_beta": 1.0, "filter_max_weight": 20.0, "filter_scale_max": None, "filter_normalize": False,
    "leak_slope": 0.1, "reward_multiplier": "auto", "n_step": 4, "nstep_correction": "none", "critic_loss": "mse",
    "conservative_coeff": 0.0, "tau": 0.003, "policy_average": 0.01, "popart": True, "popart_beta": 0.0005,
    "use_target_actor": True, "actor_trains_model": True, "history_coeff": 0.3, "value_samples": 4,
    "target_samples": 1,
}  # fmt: skip
"""`to_dict(AgentConfig())` as 0.2.0 wrote it, before the blocks, into every checkpoint and policy file."""
OLD_MULTITASK: dict[str, Any] = {
    **OLD_AGENT, "type": "multitask", "critic": {**CRITIC, "output": "bins"}, "td_reduce": "mean",
    "online_coeff": 0.0, "value_samples": 3, "labels": "two_hot", "hl_sigma": 0.75,
}  # fmt: skip


@pytest.mark.parametrize(("old", "cls"), [(OLD_AGENT, AgentConfig), (OLD_MULTITASK, MultiTaskConfig)])
def test_old_default_metadata_translates_to_the_default_agent(old: dict[str, Any], cls: type) -> None:
    assert to_dict(build_strict(cls, upgrade_flat_agent(old))) == to_dict(cls())


def test_old_metadata_keeps_every_setting_in_its_block() -> None:
    old = {**OLD_AGENT, "fbc_filter": "leaky", "leak_slope": 0.25, "n_step": 3, "nstep_correction": "tree_backup",
           "num_critics_td": 3, "td_reduce": "min", "critic_loss": "huber", "value_samples": 2, "target_samples": 5}  # fmt: skip
    cfg = build_strict(AgentConfig, upgrade_flat_agent(old))
    assert cfg.filter == LeakyFilterConfig(slope=0.25)  # the exp filter's keys had no effect: dropped
    assert to_dict(cfg.targets) == {"n_step": 3, "correction": "tree_backup", "num_critics_td": 3, "reduce": "min"}
    assert cfg.critic.loss == "huber" and cfg.critic.num_critics == 4
    assert (cfg.samples.value, cfg.samples.target) == (2, 5)


def test_new_metadata_is_left_as_it_is() -> None:
    new = to_dict(AgentConfig())
    assert upgrade_flat_agent(new) is new


def test_recorded_stage_configs_read_through_the_upgrade_while_yaml_is_refused() -> None:
    """A train stage recorded before the blocks (a lock file's config) builds with `Problems(upgrade=True)`, as
    today's config with the same settings; without it the old keys are refused with their new form."""
    stage = {"type": "train", "agent": {**OLD_AGENT, "n_step": 2}}
    problems = Problems(upgrade=True)
    built = build(StageConfig, copy.deepcopy(stage), problems, "train")
    assert not problems.items and built.agent.targets.n_step == 2
    assert to_dict(built) == to_dict(
        build_strict(TrainStageConfig, {"type": "train", "agent": {"type": "agent", "targets": {"n_step": 2}}})
    )
    refused = Problems()
    assert build(StageConfig, stage, refused, "train") is None
    moved = "train.agent.n_step: moved: write agent.targets: {num_critics_td: 2, reduce: auto, n_step: 2, correction"
    assert any(line.startswith(moved) for line in refused.lines())


def test_a_train_stage_recorded_before_the_blocks_is_unchanged_today() -> None:
    """The lock file's recorded config of a train stage with the flat keys reads as today's (`as_read_today`), so
    the upgrade re-runs nothing."""
    from amago_pipe.pipeline.fingerprint import as_read_today

    old = {"stage": {"type": "train", "agent": {**OLD_AGENT, "n_step": 2}}, "store": "s.zarr", "seed": 0}
    new = {
        "stage": {"type": "train", "agent": {"type": "agent", "targets": {"n_step": 2}}},
        "store": "s.zarr",
        "seed": 0,
    }
    assert as_read_today(old, "train") == as_read_today(new, "train") is not None
