"""EnvConfig and CollectStageConfig: strict building from YAML-like data, with precise error paths."""

from __future__ import annotations

from typing import Any

import pytest

from amago_pipe.config.build import build_strict
from amago_pipe.config.collect import CollectStageConfig
from amago_pipe.config.envs import EnvConfig
from amago_pipe.errors import ConfigError


def make(cls: type, data: dict[str, Any]) -> Any:
    return build_strict(cls, data)


def collect(**over: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "type": "collect",
        "env": {"id": "CartPole-v1"},
        "policies": [{"policy": {"type": "random"}, "episodes": 4}],
    }
    data.update(over)
    return data


def test_env_config_defaults_and_name() -> None:
    cfg = make(EnvConfig, {"id": "CartPole-v1"})
    assert (cfg.n_envs, cfg.mode, cfg.env_name) == (8, "sync", "CartPole-v1")
    assert make(EnvConfig, {"factory": "pkg.mod:fn", "name": "toy"}).env_name == "toy"


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, r"^id: give exactly one of `id`.*found neither"),
        ({"id": "CartPole-v1", "factory": "a.b:c"}, "found both"),
        ({"factory": "no_colon"}, "^factory: 'no_colon' is not an import path"),
        ({"id": "CartPole-v1", "n_envs": 0}, "^n_envs: must be at least 1, got 0"),
        ({"id": "CartPole-v1", "mode": "asynch"}, "^mode: expected one of 'sync', 'async'.*did you mean 'async'"),
        ({"id": "CartPole-v1", "obs_keys": []}, "^obs_keys: give at least one observation key to keep"),
    ],
)
def test_env_config_errors(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(EnvConfig, data)


def test_collect_config_builds() -> None:
    cfg = make(
        CollectStageConfig,
        collect(
            policies=[
                {"policy": {"type": "random"}, "episodes": 4},
                {"policy": {"type": "cartpole-pd", "exploration": {"type": "egreedy", "epsilon": 0.3}}, "episodes": 6},
            ]
        ),
    )
    assert cfg.total_episodes == 10 and cfg.output == "store" and cfg.partition == "protected"
    assert cfg.implementation().__name__ == "CollectStage"


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"policies": []}, "^policies: give at least one policy"),
        (
            {"policies": [{"policy": {"type": "randon"}, "episodes": 1}]},
            r"^policies.0.policy.type: unknown policy 'randon'.*did you mean 'random'",
        ),
        (
            {"policies": [{"policy": {"type": "scripted", "function": "nopath"}, "episodes": 1}]},
            "^policies.0.policy.function: expected 'package.module:function'",
        ),
        ({"policies": [{"policy": {"type": "random"}, "episodes": 0}]}, "^policies.0.episodes: must be at least 1"),
        (
            {
                "policies": [
                    {"policy": {"type": "random", "exploration": {"type": "egreedy", "epsilon": -1}}, "episodes": 1}
                ]
            },
            r"^policies.0.policy.exploration.epsilon: an epsilon \(a probability\) must be in \[0, 1\], got -1",
        ),
        (
            {"policies": [{"policy": {"type": "random", "exploration": {"type": "gausian"}}, "episodes": 1}]},
            "^policies.0.policy.exploration.type: unknown exploration 'gausian'.*did you mean 'gaussian'",
        ),
        (
            {"policies": [{"policy": "cartpole-pd", "episodes": 1, "noise": 0.3}]},
            r"^policies.0: the string form .* `policy: \{type: cartpole-pd, exploration: \{type: egreedy, epsilon: 0.3\}",
        ),
        (
            {"policies": [{"policy": "checkpoint:train:best", "episodes": 1}]},
            r"`policy: \{type: checkpoint, stage: train, which: best\}`",
        ),
        ({"output": "minari"}, "^dataset_id: output: minari needs a dataset_id"),
        ({"output": "minari", "dataset_id": "cartpole/mixed"}, "^dataset_id: 'cartpole/mixed' is not a Minari id"),
        ({"output": "minari", "dataset_id": "t/c-v0"}, r"'t/c-v0' is not a Minari id.*namespace of 2 or more"),
        ({"dataset_id": "cartpole/mixed-v0"}, "^dataset_id: dataset_id is only used with output: minari"),
        ({"episodes": 3}, "^episodes: unknown key 'episodes'"),
    ],
)
def test_collect_config_errors(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make(CollectStageConfig, collect(**over))
