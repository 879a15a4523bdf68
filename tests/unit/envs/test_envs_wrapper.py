"""BatchedEnv and vector modes: flat dict observations, rl2, time index, NEXT_STEP autoreset, bad env configs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from amago_pipe.config.envs import EnvConfig
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.envs.wrapper import env_seeds
from amago_pipe.errors import ConfigError, DataError

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


class Faulty(gym.Wrapper):
    """Env 1 of a vector env reset with seed 0 (the env reset with `env_seeds(0, n)[1]`) raises in step() after 2
    steps, or returns NaN rewards; the others are fine."""

    def __init__(self, env: gym.Env, nan: bool):
        super().__init__(env)
        self.nan, self.steps, self.faulty = nan, 0, False

    def reset(self, **kwargs):
        self.faulty = kwargs.get("seed") == env_seeds(0, 2)[1] or self.faulty
        return self.env.reset(**kwargs)

    def step(self, action):
        self.steps += 1
        obs, reward, term, trunc, info = self.env.step(action)
        if self.faulty and self.steps > 2:
            if self.nan:
                return obs, float("nan"), term, trunc, info
            raise RuntimeError("the simulator diverged")
        return obs, reward, term, trunc, info


def faulty_env(nan: bool = False) -> gym.Env:
    from amago_pipe.envs.toy import ToyEnv

    return Faulty(ToyEnv(min_len=50, max_len=50), nan=nan)


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("nan", [False, True], ids=["raises", "nan"])
def test_a_failing_env_is_named_by_its_index(mode: str, nan: bool) -> None:
    cfg = EnvConfig(factory=f"{__name__}:faulty_env", kwargs={"nan": nan}, n_envs=3, mode=mode)
    with make_batched_env(cfg, where="stages.c.env") as env:
        env.reset(seed=0)
        env.step(np.zeros(3, np.int64))
        env.step(np.zeros(3, np.int64))
        message = r"non-finite reward at step 3" if nan else r"raised RuntimeError in step\(\): the simulator diverged"
        with pytest.raises(DataError, match=rf"^stages.c.env: env 1 \(.*{message}"):
            env.step(np.zeros(3, np.int64))


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("nan", [False, True], ids=["raises", "nan"])
def test_on_error_skip_discards_the_failing_episode_and_goes_on(mode: str, nan: bool) -> None:
    from amago_pipe.config.policies import policy_config
    from amago_pipe.envs.policies import PolicyContext, make_policy
    from amago_pipe.envs.rollout import rollout

    cfg = EnvConfig(factory=f"{__name__}:flaky_env", kwargs={"nan": nan}, n_envs=2, mode=mode, on_error="skip")
    with make_batched_env(cfg, where="stages.c.env") as env:
        ctx = PolicyContext(spec=env.spec, n_envs=2, seed=0, env_name=env.env_name, upstream={}, where="p")
        result = rollout(env, make_policy(policy_config({"type": "random"}), ctx), 12, seed=0, keep_episodes=True)
    failed = [s for s in result.stats if s.info.get("amago_pipe/env_error")]
    assert len(result.stats) == 12 and 1 <= len(failed) <= 6
    assert len(result.episodes) == 12 - len(failed)  # the failed episodes are not kept
    for ep in result.episodes:
        assert np.isfinite(ep.rewards).all() and ep.length == 10


class Flaky(gym.Wrapper):
    """Fails on the 7th step of every second episode (raises, or returns a NaN reward)."""

    def __init__(self, env, nan):
        super().__init__(env)
        self.nan, self.episodes, self.t = nan, 0, 0

    def reset(self, **kwargs):
        self.episodes, self.t = self.episodes + 1, 0
        return self.env.reset(**kwargs)

    def step(self, action):
        self.t += 1
        out = self.env.step(action)
        if self.episodes % 2 == 0 and self.t == 7:
            if self.nan:
                return out[0], float("nan"), *out[2:]
            raise RuntimeError("the simulator diverged")
        return out


def flaky_env(nan: bool = False) -> gym.Env:
    from amago_pipe.envs.toy import ToyEnv

    return Flaky(ToyEnv(min_len=10, max_len=10), nan=nan)


def test_on_error_skip_stops_an_env_that_always_fails() -> None:
    cfg = EnvConfig(factory=f"{__name__}:faulty_env", n_envs=2, on_error="skip")
    with make_batched_env(cfg, where="stages.c.env") as env:
        env.reset(seed=0)
        with pytest.raises(DataError, match=r"env 1 \(.*\) failed 11 times \(last: RuntimeError in step\(\)"):
            steps(env, 40)


def steps(env: Any, n: int) -> None:
    for _ in range(n):
        env.step(np.zeros(env.n_envs, np.int64))


class WithText(gym.Wrapper):
    """GoalMaze with a text field added to its Dict observation (as MiniGrid's `mission`)."""

    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Dict({**env.observation_space.spaces, "mission": gym.spaces.Text(20)})

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return {**obs, "mission": "reach the goal"}, info

    def step(self, action):
        obs, *rest = self.env.step(action)
        return {**obs, "mission": "reach the goal"}, *rest


def text_goal_maze() -> gym.Env:
    from amago_pipe.envs.builtin.goal_maze import GoalMaze

    return WithText(GoalMaze())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_obs_keys_keep_only_the_named_keys(mode: str) -> None:
    factory = f"{__name__}:text_goal_maze"
    with pytest.raises(ConfigError, match=r"unsupported observation space Text at 'mission'.*`obs_keys: \[\.\.\.\]`"):
        make_batched_env(EnvConfig(factory=factory, n_envs=2, mode=mode))
    cfg = EnvConfig(factory=factory, n_envs=2, mode=mode, obs_keys=["observation", "desired_goal"])
    with make_batched_env(cfg) as env:
        assert sorted(env.spec.observations) == ["desired_goal", "observation"]
        first = env.reset(seed=0)
        step = env.step(np.array([0, 1]))
        assert sorted(first.obs) == sorted(step.obs) == ["desired_goal", "observation"]


def test_obs_keys_name_what_the_env_has() -> None:
    with pytest.raises(ConfigError, match=r"env.obs_keys: \['goal'\] not in the env's observations \(its keys are"):
        make_batched_env(EnvConfig(id="amago_pipe/GoalMaze-v0", n_envs=1, obs_keys=["observation", "goal"]))
    with pytest.raises(ConfigError, match=r"obs_keys: \['x'\] not in .*\(its observation space is Box, not a Dict\)"):
        make_batched_env(EnvConfig(id="CartPole-v1", n_envs=1, obs_keys=["x"]))
