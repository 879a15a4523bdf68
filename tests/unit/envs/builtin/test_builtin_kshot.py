"""KShot contract: k attempts per outer episode, reset flag layouts, per-attempt info, how tasks are kept."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from amago_pipe.envs.builtin import KShot, kshot
from amago_pipe.envs.builtin.kshot import KEEP_TASK
from amago_pipe.envs.toy import ToyEnv
from amago_pipe.errors import ConfigError, DataError


class ResetLog(gym.Env):
    """Each attempt lasts `length` steps (truncated); records the (seed, options) of every reset."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, length: int = 2, keeps_task: bool = False, terminate: bool = False):
        self.length, self.terminate = length, terminate
        self.supports_keep_task = keeps_task
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.resets: list[tuple[int | None, dict | None]] = []
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.resets.append((seed, options))
        self._t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._t += 1
        end = self._t >= self.length
        info = {"success": self._t % 2 == 0} if end else {}
        return np.zeros(2, np.float32), 1.0 + int(action), end and self.terminate, end and not self.terminate, info


def run_episode(env: gym.Env, action: int = 0) -> list[tuple[Any, float, bool, bool, dict[str, Any]]]:
    steps = []
    while not steps or not (steps[-1][2] or steps[-1][3]):
        steps.append(env.step(action))
    return steps


def test_k_attempts_with_reset_flag_and_per_attempt_info() -> None:
    env = KShot(ResetLog(length=2), 3)
    obs, info = env.reset(seed=5)
    assert obs.tolist() == [0.0, 0.0, 1.0] and info == {"amago_pipe/attempts": 0}
    steps = run_episode(env, action=1)
    assert [s[0][-1] for s in steps] == [0.0, 1.0, 0.0, 1.0, 0.0, 0.0]  # flag on each attempt's first obs
    assert [s[1] for s in steps] == [2.0] * 6
    assert [(s[2], s[3]) for s in steps][-1] == (False, True)  # last attempt truncated -> outer truncated
    assert not any(s[2] or s[3] for s in steps[:-1])
    ends = [s[4] for s in steps if "amago_pipe/attempts" in s[4]]
    assert [e["amago_pipe/attempts"] for e in ends] == [1, 2, 3]
    assert [e[f"amago_pipe/attempt_{i}_return"] for i, e in enumerate(ends, 1)] == [4.0, 4.0, 4.0]
    assert [e[f"amago_pipe/attempt_{i}_success"] for i, e in enumerate(ends, 1)] == [1.0, 1.0, 1.0]
    assert env.observation_space.shape == (3,)


def test_outer_terminates_when_the_last_attempt_terminates() -> None:
    steps = run_episode(_reset(KShot(ResetLog(length=1, terminate=True), 2)))
    assert [(s[2], s[3]) for s in steps] == [(False, False), (True, False)]


def _reset(env: gym.Env) -> gym.Env:
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("keeps_task", [False, True])
def test_tasks_are_kept_by_unseeded_resets_and_the_keep_task_option(keeps_task: bool) -> None:
    inner = ResetLog(length=1, keeps_task=keeps_task)
    env = KShot(inner, 3, reset_signal=False)
    env.reset(seed=7, options={"x": 1})
    run_episode(env)
    between = {KEEP_TASK: True} if keeps_task else None
    assert inner.resets == [(7, {"x": 1}), (None, between), (None, between)]


def test_dict_and_discrete_observations_get_a_reset_key() -> None:
    env = KShot(ToyEnv(), 2)
    obs, _ = env.reset(seed=0)
    assert set(obs) == {"pos", "step", "reset"} and obs["reset"].tolist() == [1.0]
    assert env.observation_space.contains(obs)
    lake = KShot(gym.make("FrozenLake-v1"), 2)
    obs, _ = lake.reset(seed=0)
    assert set(obs) == {"observation", "reset"} and lake.observation_space.contains(obs)
    assert KShot(ToyEnv(), 2, reset_signal=False).observation_space == ToyEnv().observation_space


def test_passes_the_gymnasium_checker() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "the env is wrapped" warning
        check_env(KShot(gym.make("CartPole-v1"), 2), skip_render_check=True)  # rendering needs pygame
        check_env(KShot(ToyEnv(), 2))


def test_kshot_factory_limits_each_attempt() -> None:
    env = kshot(env_id="CartPole-v1", k=3, max_episode_steps=4)
    env.reset(seed=0)
    steps = run_episode(env)
    assert len(steps) == 12 and steps[-1][3] and not steps[-1][2]
    assert steps[-1][4]["amago_pipe/attempt_3_return"] == 4.0


def test_errors() -> None:
    with pytest.raises(ValueError, match="KShot: k must be at least 1, got 0"):
        KShot(ToyEnv(), 0)
    with pytest.raises(ValueError, match="already has a 'reset' key; use reset_signal=False"):
        KShot(KShot(ToyEnv(), 2), 2)
    with pytest.raises(ConfigError, match="kshot: cannot make gymnasium env 'CartPol-v1'"):
        kshot(env_id="CartPol-v1", k=2)
    with pytest.raises(ConfigError, match=r"kshot: gymnasium env 'amago_pipe/TMaze-v0' rejected kwargs \['corridor'\]"):
        kshot(env_id="amago_pipe/TMaze-v0", k=2, kwargs={"corridor": 3})


class NewGoalEveryReset(ToyEnv):
    """Draws a new `goal` at every reset, seeded or not (as Meta-World does): no task survives an attempt."""

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        out = super().reset(seed=seed, options=options)
        self.goal = self.np_random.uniform(size=3)
        return out


def test_a_task_that_changes_between_attempts_stops_the_run() -> None:
    env = KShot(NewGoalEveryReset(min_len=2, max_len=2), k=3)
    env.reset(seed=0)
    env.step(0)
    with pytest.raises(DataError, match=r"drew a new task between attempts 1 and 2 \(its `goal` changed\)"):
        env.step(0)
    kept = KShot(ToyEnv(min_len=2, max_len=2), k=3)  # exposes no task: nothing to check, runs
    kept.reset(seed=0)
    for _ in range(6):
        kept.step(0)
