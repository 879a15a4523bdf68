"""gymnax (JAX) envs stepped as one batch through `mode: already_vectorized` (the `gymnax` extra).

Each check runs in a fresh spawned process: JAX's threads must not live in pytest's own process, whose later
tests fork (async envs, forked samplers).
"""

from __future__ import annotations

import importlib.util
import multiprocessing
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_envs_rollout import CountingPolicy

from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.gymnax import make_gymnax
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("gymnax") is None, reason='gymnax is an optional extra: pip install -e ".[gymnax]"'
)
FACTORY = "amago_pipe.envs.gymnax:make_gymnax"


def _isolated(check: Callable[..., None], *args: Any) -> None:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(check, args)  # an assertion error in the child is raised here


def _check_gymnax_episodes_have_clean_boundaries_and_memory_resets(source: str) -> None:
    where = {"id": "gymnax/CartPole-v1"} if source == "id" else {"factory": FACTORY, "kwargs": {"name": "CartPole-v1"}}
    cfg = EnvConfig(**where, n_envs=4, mode="already_vectorized", max_episode_steps=6)  # type: ignore[arg-type]
    with make_batched_env(cfg) as env:
        assert env.n_envs == 4 and env.spec.action.kind == "discrete" and env.spec.action.n == 2
        policy = CountingPolicy(action=1)  # checks time == its counter, reset exactly at episode starts
        result = rollout(env, policy, 12, seed=0)
    assert len(result.episodes) == 12 and policy.resets >= 12 - 4
    for ep in result.episodes:
        assert ep.rewards.sum() == ep.length  # one reward per step, no reset step glued on
        # pushing right, the pole does not fall within 6 steps: every episode is cut by the step limit
        assert ep.length == 6 and ep.truncated[-1] and not ep.terminated.any()


def _check_gymnax_terminal_step_keeps_its_observation_and_reward() -> None:
    """MemoryChain pays ±1 on its last step; gymnax's own step would replace that observation by a reset one."""
    env = make_gymnax("MemoryChain-bsuite", 3, memory_length=3)
    obs, _ = env.reset(seed=1)
    assert obs.shape == (3, 3) and obs.dtype == np.float32 and obs.flags.writeable
    context = obs[:, 2].copy()  # ±1, shown at the start
    actions = (context > 0).astype(np.int64)  # the right answer
    rewards, ends = [], []
    for _ in range(4):
        obs, reward, terminated, truncated, _ = env.step(actions)
        rewards.append(reward)
        ends.append(terminated)
    assert np.array_equal(np.array(rewards)[-1], np.ones(3)) and not np.array(rewards)[:-1].any()
    assert np.array(ends)[-1].all() and not np.array(ends)[:-1].any()
    assert np.all(obs[:, 0] < 0.5)  # the timer of the final step, not a fresh episode's 1.0
    obs, reward, terminated, truncated, _ = env.step(actions)  # the reset step
    assert np.all(obs[:, 0] == 1.0) and not reward.any() and not (terminated.any() or truncated.any())


def _check_gymnax_same_seed_same_episodes() -> None:
    def run(seed: int) -> np.ndarray:
        env = make_gymnax("Catch-bsuite", 2)
        frames = [env.reset(seed=seed)[0]]
        frames += [env.step(np.array([i % 3, (i + 1) % 3]))[0] for i in range(15)]
        return np.stack(frames)

    assert np.array_equal(run(3), run(3)) and not np.array_equal(run(3), run(4))


def _check_gymnax_refusals_name_the_fix() -> None:
    with pytest.raises(ConfigError, match="steps all its copies as one batch; set `mode: already_vectorized`"):
        make_batched_env(EnvConfig(id="gymnax/CartPole-v1", n_envs=2))
    with pytest.raises(ConfigError, match="not a gymnax env.*CartPole-v1"):
        make_gymnax("CartPole-v2", 2)
    with pytest.raises(ConfigError, match="has no parameter.*memory_lenght.*memory_length"):
        make_gymnax("MemoryChain-bsuite", 2, memory_lenght=4)


@pytest.mark.parametrize("source", ["id", "factory"])
def test_gymnax_episodes_have_clean_boundaries_and_memory_resets(source: str) -> None:
    _isolated(_check_gymnax_episodes_have_clean_boundaries_and_memory_resets, source)


def test_gymnax_terminal_step_keeps_its_observation_and_reward() -> None:
    _isolated(_check_gymnax_terminal_step_keeps_its_observation_and_reward)


def test_gymnax_same_seed_same_episodes() -> None:
    _isolated(_check_gymnax_same_seed_same_episodes)


def test_gymnax_refusals_name_the_fix() -> None:
    _isolated(_check_gymnax_refusals_name_the_fix)
