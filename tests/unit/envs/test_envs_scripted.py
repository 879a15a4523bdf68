"""The builtin scripted controllers really control: CartPole-v1 reaches 500, Pendulum-v1 gets near the top."""

from __future__ import annotations

import numpy as np

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import policy_config
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env


def mean_return(env_id: str, policy: str, episodes: int) -> float:
    with make_batched_env(EnvConfig(id=env_id, n_envs=episodes)) as env:
        ctx = PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=0, env_name=env_id)
        result = rollout(env, make_policy(policy_config(policy), ctx), episodes, seed=0, keep_episodes=False)
    return float(np.mean([s.episode_return for s in result.stats]))


def test_cartpole_pd_balances() -> None:
    assert mean_return("CartPole-v1", "cartpole-pd", 2) == 500.0


def test_pendulum_energy_swings_up() -> None:
    assert mean_return("Pendulum-v1", "pendulum-energy", 4) > -300.0  # random play scores about -1200


def test_random_cartpole_is_poor() -> None:
    assert mean_return("CartPole-v1", "random", 8) < 60.0
