"""The Meta-World adapter: the goal stays fixed for the k attempts of an episode, train and test goals differ,
a missing extra is exit 4 naming the install. Skipped without the `metaworld` extra."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from amago_pipe.errors import ConfigError

pytest.importorskip("metaworld", reason="the `metaworld` extra (pip install 'amago-pipe[metaworld]') is not installed")

from amago_pipe.envs.metaworld import metaworld_kshot


def test_the_goal_is_kept_across_attempts_and_redrawn_per_episode() -> None:
    env = metaworld_kshot(env_name="reach-v3", k=3, attempt_steps=5, terminate_on_success=False)
    obs, _ = env.reset(seed=0)
    assert obs.shape == (40,) and obs[-1] == 1.0  # 39 Meta-World features + the reset flag
    goals, rng = [env.unwrapped.task.copy()], np.random.default_rng(0)
    done, flags, info = False, [], {}
    while not done:
        obs, _, terminated, truncated, info = env.step(rng.uniform(-1, 1, 4))
        flags.append(obs[-1])
        goals.append(env.unwrapped.task.copy())
        done = terminated or truncated
    assert len(flags) == 15 and flags.count(1.0) == 2  # attempts 2 and 3 start with the flag
    assert all(np.array_equal(g, goals[0]) for g in goals)  # one goal for all three attempts
    assert info["amago_pipe/attempts"] == 3 and "amago_pipe/attempt_3_return" in info
    episode_goals = {tuple(goals[0])}
    for _ in range(4):
        env.reset()
        episode_goals.add(tuple(env.unwrapped.task))
    assert len(episode_goals) > 1  # a new episode draws a new goal


def test_train_and_test_goals_are_different_sets() -> None:
    def goals(split: str) -> set[tuple[float, ...]]:
        env = metaworld_kshot(env_name="reach-v3", split=split, k=1)  # type: ignore[arg-type]
        return {tuple(np.round(_goal(env, i), 6)) for i in range(len(env.unwrapped.tasks))}  # type: ignore[attr-defined]

    train, test = goals("train"), goals("test")
    assert len(train) > 1 and len(test) > 1 and not train & test


def _goal(env: object, i: int) -> np.ndarray:
    inner = env.unwrapped  # type: ignore[attr-defined]
    inner.env.set_task(inner.tasks[i])
    inner.env.reset()
    return np.asarray(inner.env._target_pos)


def test_bad_names_and_a_missing_extra_are_one_clear_error() -> None:
    with pytest.raises(ConfigError, match=r"'reach-v2' is not a Meta-World v3 env .*did you mean 'reach-v3'"):
        metaworld_kshot(env_name="reach-v2")
    with pytest.raises(ConfigError, match=r"attempt_steps: must be in 1..500"):
        metaworld_kshot(attempt_steps=600)
    code = (
        "import sys; sys.modules['metaworld'] = None\n"
        "from amago_pipe.envs.metaworld import metaworld_kshot\n"
        "try:\n    metaworld_kshot()\nexcept Exception as e:\n    print(type(e).__name__, e.exit_code, e)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120).stdout
    assert out.startswith("MissingDependencyError 4") and "pip install 'amago-pipe[metaworld]'" in out, out
