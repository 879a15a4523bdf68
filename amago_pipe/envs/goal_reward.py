"""The env's own `compute_reward` as a relabeling reward (`reward: {type: env, env: ...}`).

The env is built once and never stepped. gymnasium only, no torch.
"""

from __future__ import annotations

from typing import Any

from amago_pipe.envs.factory import EnvFactory
from amago_pipe.errors import ConfigError
from amago_pipe.relabel.rewards import RawReward


def env_reward(config: Any, *, where: str) -> RawReward:
    """`env.unwrapped.compute_reward` of the configured env (ConfigError when it has none)."""
    env = EnvFactory.from_config(config.env, where=f"{where}.env")()
    try:
        fn = getattr(env.unwrapped, "compute_reward", None)
    finally:
        env.close()
    if not callable(fn):
        raise ConfigError(
            f"{where}: env '{config.env.env_name}' has no compute_reward(achieved_goal, desired_goal, info) method "
            "(gymnasium-robotics' GoalEnv API); use `reward: {type: threshold, distance: ...}` or "
            "`{type: function, function: package.module:name}`",
            path=f"{where}.type",
        )
    return fn  # type: ignore[no-any-return]
