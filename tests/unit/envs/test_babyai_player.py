"""The `babyai-bot` collect policy: it solves BabyAI levels of a task set from the env's own state, recovers from
random actions, and refuses what it cannot play. Skipped without the `envs` extra (minigrid)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from amago_pipe.config.build import build_strict
from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import BabyAIBotConfig
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError, DataError

pytest.importorskip("minigrid", reason="the `envs` extra (pip install 'amago-pipe[envs]': minigrid) is not installed")

LEVELS = [
    {"id": "minigrid:BabyAI-GoToLocalS6N3-v0", "name": "goto"},
    {"id": "minigrid:BabyAI-PutNextLocal-v0", "name": "putnext"},
]


def _env(**data: Any) -> EnvConfig:
    base = {
        "tasks": LEVELS,
        "obs_keys": ["image", "direction", "mission"],
        "n_envs": 4,
        "text": {"vocabulary": "minigrid"},
    }
    return build_strict(EnvConfig, {**base, **data})  # type: ignore[no-any-return]


def _success(epsilon: float, episodes: int = 16) -> dict[str, float]:
    with make_batched_env(_env()) as env:
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=0, env=env, where="collect.policies.0.policy")
        result = rollout(env, make_policy(BabyAIBotConfig(epsilon=epsilon), ctx), episodes, seed=0)
    per_task: dict[str, list[bool]] = {}
    for s in result.stats:
        per_task.setdefault(s.env_name, []).append(s.episode_return > 0)
    return {name: float(np.mean(ok)) for name, ok in per_task.items()}


def test_the_bot_solves_each_level_and_recovers_from_random_actions() -> None:
    assert _success(0.0) == {"goto": 1.0, "putnext": 1.0}
    noisy = _success(0.3)
    assert set(noisy) == {"goto", "putnext"} and min(noisy.values()) >= 0.5


def test_the_bot_refuses_what_it_cannot_play() -> None:
    with make_batched_env(_env(tasks=[{"id": "minigrid:MiniGrid-Empty-5x5-v0", "name": "empty"}])) as env:
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, env=env, where="collect.policies.0.policy")
        with pytest.raises(DataError, match=r"plays BabyAI levels; slot 0 runs EmptyEnv \(empty\)"):
            make_policy(BabyAIBotConfig(), ctx)  # refused before anything is collected
    with make_batched_env(_env(mode="async", n_envs=2)) as env:
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, env=env, where="collect.policies.0.policy")
        with pytest.raises(ConfigError, match="only mode: sync"):
            make_policy(BabyAIBotConfig(), ctx)
        with pytest.raises(ConfigError, match="can only collect"):
            make_policy(BabyAIBotConfig(), PolicyContext(spec=env.spec, n_envs=2))


def test_success_on_reward_gives_babyai_episodes_a_success_flag() -> None:
    wrappers = [{"type": "success_on_reward"}]
    with make_batched_env(_env(wrappers=wrappers, max_episode_steps=12)) as env:  # short: many runs time out
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=0, env=env)
        result = rollout(env, make_policy(BabyAIBotConfig(epsilon=0.5), ctx), 24, seed=0)
    assert [s.success for s in result.stats] == [s.episode_return > 0 for s in result.stats]
    assert 0 < result.summary()["success_rate"] < 1
    assert any(s.truncated and s.success is False for s in result.stats)
