"""BatchedEnv and vector modes: flat dict observations, rl2, time index, NEXT_STEP autoreset, bad env configs."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError

TOY = "amago_pipe.envs.toy:make_toy_env"


def test_cartpole_reset_shapes() -> None:
    with make_batched_env(EnvConfig(id="CartPole-v1", n_envs=3)) as env:
        step = env.reset(seed=0)
        assert set(step.obs) == {"observation"}
        assert step.obs["observation"].shape == (3, 4)
        assert step.rl2.shape == (3, 3) and not step.rl2.any()
        np.testing.assert_array_equal(step.time, [0, 0, 0])
        assert step.started.all() and env.env_name == "CartPole-v1"


def test_next_step_autoreset_starts_a_clean_episode() -> None:
    cfg = EnvConfig(factory=TOY, kwargs={"min_len": 2, "max_len": 2}, n_envs=2)
    with make_batched_env(cfg) as env:
        step = env.reset(seed=1)
        assert set(step.obs) == {"pos", "step"}
        step = env.step(np.array([1, 2]))
        np.testing.assert_array_equal(step.time, [1, 1])
        np.testing.assert_array_equal(step.rl2, [[1, 0, 1, 0], [2, 0, 0, 1]])  # [reward, one-hot action]
        step = env.step(np.array([0, 0]))
        assert step.terminated.all() and not step.started.any()
        np.testing.assert_array_equal(step.obs["step"], [2, 2])
        step = env.step(np.array([2, 2]))  # NEXT_STEP: these actions are ignored, the envs reset
        assert step.started.all() and not step.done.any()
        np.testing.assert_array_equal(step.obs["step"], [0, 0])
        np.testing.assert_array_equal(step.time, [0, 0])
        assert not step.rl2.any() and not step.reward.any()


def test_continuous_actions_are_mapped_to_box_bounds() -> None:
    cfg = EnvConfig(factory=TOY, kwargs={"action": "continuous", "low": -2.0, "high": 4.0}, n_envs=2)
    with make_batched_env(cfg) as env:
        env.reset(seed=0)
        step = env.step(np.array([[1.0, 1.0], [-1.0, 0.0]], dtype=np.float32))
        np.testing.assert_allclose(step.reward, [8.0, -1.0])  # reward = sum of env-space actions
        np.testing.assert_allclose(step.env_actions, [[4.0, 4.0], [-2.0, 1.0]])
        np.testing.assert_allclose(step.rl2[:, 1:], [[1.0, 1.0], [-1.0, 0.0]])  # rl2 keeps [-1, 1] units


def test_async_mode_matches_sync() -> None:
    results = []
    for mode in ("sync", "async"):
        cfg = EnvConfig(factory=TOY, kwargs={"min_len": 1, "max_len": 4}, n_envs=2, mode=mode)
        with make_batched_env(cfg) as env:
            env.reset(seed=5)
            steps = [env.step(np.array([1, 2])) for _ in range(8)]
            results.append(np.stack([s.obs["step"] for s in steps]))
    np.testing.assert_array_equal(results[0], results[1])


def test_max_episode_steps_truncates() -> None:
    cfg = EnvConfig(factory=TOY, kwargs={"terminate": False}, n_envs=1, max_episode_steps=2)
    with make_batched_env(cfg) as env:
        env.reset(seed=0)
        env.step(np.array([0]))
        step = env.step(np.array([0]))
        assert step.truncated.all() and not step.terminated.any()


def test_unknown_env_id_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="env.id: cannot make gymnasium env 'CartPol-v1'"):
        make_batched_env(EnvConfig(id="CartPol-v1", n_envs=1))


def test_bad_factory_and_kwargs_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="cannot import module 'no_such_mod'"):
        make_batched_env(EnvConfig(factory="no_such_mod:make", n_envs=1))
    with pytest.raises(ConfigError, match=r"calling 'amago_pipe.envs.toy:make_toy_env' with kwargs \['bogus'\] failed"):
        make_batched_env(EnvConfig(factory=TOY, kwargs={"bogus": 1}, n_envs=1))
    with pytest.raises(ConfigError, match=r"rejected kwargs \['bogus'\]"):
        make_batched_env(EnvConfig(id="CartPole-v1", kwargs={"bogus": 1}, n_envs=1))
    with pytest.raises(ConfigError, match="returned dict, expected a gymnasium.Env"):
        make_batched_env(EnvConfig(factory="builtins:dict", kwargs={"a": 3}, n_envs=1))
