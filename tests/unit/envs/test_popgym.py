"""POPGym adapter: one-hot spaces, padding to a shared spec, check_env, batched rollouts, error messages."""

from __future__ import annotations

import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from amago_pipe.config.envs import EnvConfig
from amago_pipe.config.policies import RandomPolicyConfig
from amago_pipe.envs.policies import PolicyContext, make_policy
from amago_pipe.envs.popgym import DiscreteActionAdapter, make_popgym, register_popgym_envs
from amago_pipe.envs.rollout import rollout
from amago_pipe.envs.vector import make_batched_env
from amago_pipe.errors import ConfigError, MissingDependencyError

FACTORY = "amago_pipe.envs.popgym:make_popgym"
PIPELINE_TASKS = ["RepeatFirstEasy", "RepeatPreviousEasy", "AutoencodeEasy"]
"""The tasks of pipelines/popgym-memory.yaml."""
SHARED = {"obs_size": 6, "n_actions": 27}
"""Padding that gives these tasks and CountRecallEasy (27 actions) one DataSpec."""


@pytest.fixture
def popgym() -> Any:
    return pytest.importorskip("popgym", reason='popgym is an optional extra: pip install -e ".[envs]"')


def _check(env: gym.Env) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "env is different from the unwrapped version": expected for wrappers
        check_env(env, skip_render_check=True)


@pytest.mark.parametrize(
    "name", [*PIPELINE_TASKS, "CountRecallEasy", "BattleshipEasy", "PositionOnlyPendulumEasy", "MultiarmedBanditEasy"]
)
def test_tasks_pass_gymnasium_check_env(popgym: Any, name: str) -> None:
    env = make_popgym(name)
    assert isinstance(env.observation_space, gym.spaces.Box) and env.observation_space.dtype == np.float32
    _check(env)


def test_discrete_observations_become_one_hot(popgym: Any) -> None:
    env = make_popgym("AutoencodeEasy")  # Tuple(Discrete(2), Discrete(4)) -> 2 + 4 one-hot features
    assert env.observation_space.shape == (6,) and env.action_space == gym.spaces.Discrete(4)
    obs, _ = env.reset(seed=0)
    assert obs.dtype == np.float32 and obs[:2].sum() == 1.0 and obs[2:].sum() == 1.0
    _, reward, terminated, truncated, _ = env.step(0)
    assert isinstance(reward, float) and isinstance(terminated, bool) and truncated is False
    counts = make_popgym("CountRecallEasy")  # MultiDiscrete([2, 2]) observations
    assert counts.observation_space.shape == (4,)


def test_padding_gives_tasks_one_shared_spec(popgym: Any) -> None:
    envs = [make_popgym(name, **SHARED) for name in [*PIPELINE_TASKS, "CountRecallEasy"]]
    assert {e.observation_space.shape for e in envs} == {(6,)}
    assert all(e.action_space == gym.spaces.Discrete(27) for e in envs)
    obs, _ = envs[1].reset(seed=0)  # RepeatPrevious: 4 one-hot features, then 2 zeros
    assert obs[:4].sum() == 1.0 and not obs[4:].any()
    for env in envs:
        _check(env)


def test_pipeline_tasks_share_a_spec_without_action_padding(popgym: Any) -> None:
    envs = [make_popgym(name, obs_size=6) for name in PIPELINE_TASKS]
    assert {e.observation_space.shape for e in envs} == {(6,)}
    assert all(e.action_space == gym.spaces.Discrete(4) for e in envs)


def test_extra_action_ids_wrap_around(popgym: Any) -> None:
    a, b = make_popgym("RepeatPreviousEasy", n_actions=27), make_popgym("RepeatPreviousEasy")
    a.reset(seed=3)
    b.reset(seed=3)
    for action in [5, 26, 8, 3, 14, 0, 9]:  # 5 % 4 == 1, 26 % 4 == 2, ...
        step_a, step_b = a.step(action), b.step(action % 4)
        np.testing.assert_array_equal(step_a[0], step_b[0])
        assert step_a[1:4] == step_b[1:4]


def test_multidiscrete_actions_become_one_discrete(popgym: Any) -> None:
    env = make_popgym("BattleshipEasy")  # MultiDiscrete([8, 8]) -> Discrete(64)
    assert env.action_space == gym.spaces.Discrete(64)
    assert isinstance(env, DiscreteActionAdapter)
    np.testing.assert_array_equal(env.action(9), [1, 1])
    np.testing.assert_array_equal(env.action(63), [7, 7])


def test_batched_random_rollout(popgym: Any) -> None:
    cfg = EnvConfig(factory=FACTORY, kwargs={"name": "RepeatPreviousEasy", **SHARED}, n_envs=2, name="popgym/rp")
    with make_batched_env(cfg) as env:
        assert set(env.spec.observations) == {"observation"} and env.spec.observations["observation"].shape == (6,)
        assert env.spec.action.kind == "discrete" and env.spec.action.n == 27
        policy = make_policy(RandomPolicyConfig(), PolicyContext(spec=env.spec, n_envs=env.n_envs, seed=0))
        result = rollout(env, policy, 4, seed=0, source="random")
    assert len(result.episodes) == 4
    for ep, st in zip(result.episodes, result.stats):
        assert ep.length == 51 and ep.terminated[-1] and not ep.truncated.any()  # 52 cards, one step each but the last
        assert ep.obs["observation"].shape == (52, 6) and ep.env_name == "popgym/rp"
        assert -1.0 - 1e-6 <= st.episode_return <= 1.0 + 1e-6 and st.success is None


def test_registered_ids_build_through_make_popgym(popgym: Any) -> None:
    register_popgym_envs()
    register_popgym_envs()  # idempotent
    env = gym.make("popgym/CountRecallEasy-v0", obs_size=6)
    assert env.observation_space.shape == (6,) and env.action_space == gym.spaces.Discrete(27)
    cfg = EnvConfig(id="popgym/RepeatPreviousEasy-v0", kwargs=SHARED, n_envs=2)
    with make_batched_env(cfg) as batched:
        assert batched.env_name == "popgym/RepeatPreviousEasy-v0" and batched.spec.action.n == 27


def test_unknown_task_names_the_closest(popgym: Any) -> None:
    with pytest.raises(
        ConfigError, match=r"unknown POPGym task 'RepeatPreviousEsy' \(known: .*did you mean 'RepeatPreviousEasy'"
    ):
        make_popgym("RepeatPreviousEsy")


def test_bad_sizes_and_kwargs_are_config_errors(popgym: Any) -> None:
    with pytest.raises(ConfigError, match=r"obs_size: POPGym task 'AutoencodeEasy' needs 6 .* got obs_size=4"):
        make_popgym("AutoencodeEasy", obs_size=4)
    with pytest.raises(ConfigError, match=r"n_actions: POPGym task 'CountRecallEasy' has 27 actions, got n_actions=4"):
        make_popgym("CountRecallEasy", n_actions=4)
    with pytest.raises(ConfigError, match=r"n_actions: .* continuous actions"):
        make_popgym("PositionOnlyPendulumEasy", n_actions=4)
    with pytest.raises(ConfigError, match=r"'RepeatPreviousMedium' rejected kwargs \['k'\].*'RepeatPrevious'"):
        make_popgym("RepeatPreviousMedium", k=3)
    assert make_popgym("RepeatPrevious", num_decks=1, k=2).action_space == gym.spaces.Discrete(4)


def test_missing_popgym_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "popgym", None)  # what an environment without popgym sees
    monkeypatch.setitem(sys.modules, "popgym.envs", None)
    with pytest.raises(MissingDependencyError, match=r"optional package 'popgym'.*pip install -e \"\.\[envs\]\"") as e:
        make_popgym("RepeatPreviousEasy")
    assert e.value.exit_code == 4
