"""The `reach-searcher` collect policy: going back to what attempt 1 found lifts later attempts; forgetting does
not. Skipped without the `metaworld` extra."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.config.build import FieldError
from amago_pipe.config.policies import ReachSearcherConfig
from amago_pipe.envs.policies import PolicyContext
from amago_pipe.errors import DataError
from amago_pipe.spec import from_spaces

pytest.importorskip("metaworld", reason="the `metaworld` extra (pip install 'amago-pipe[metaworld]') is not installed")

from amago_pipe.envs.metaworld import metaworld_kshot
from amago_pipe.envs.metaworld_player import reach_searcher_policy


def _attempt_success(remember: bool, episodes: int = 16) -> np.ndarray:
    """(episodes, 3) success of each attempt, the player acting on one env through the policy interface."""
    env = metaworld_kshot(env_name="reach-v3", k=3, attempt_steps=40)
    spec = from_spaces(env.observation_space, env.action_space)
    out = np.zeros((episodes, 3))
    for e in range(episodes):  # a player per episode, seeded like it: attempt 1 is the same with or without memory
        ctx = PolicyContext(spec=spec, n_envs=1, seed=e)
        policy = reach_searcher_policy(ReachSearcherConfig(remember=remember), ctx)
        obs, _ = env.reset(seed=e)
        rl2, done = np.zeros((1, 5), np.float32), False
        while not done:
            action = policy.act({"observation": obs[None]}, rl2, np.zeros(1))[0]
            obs, reward, terminated, truncated, info = env.step(action)
            rl2[0, 0] = reward
            done = terminated or truncated
            for i in range(3):  # an attempt's success is reported at the step that ends it
                out[e, i] = info.get(f"amago_pipe/attempt_{i + 1}_success", out[e, i])
    return out


def test_remembering_lifts_later_attempts_and_forgetting_does_not() -> None:
    keeps, forgets = _attempt_success(True), _attempt_success(False)
    np.testing.assert_array_equal(keeps[:, 0], forgets[:, 0])  # attempt 1: nothing to remember yet
    assert keeps[:, 0].mean() < 0.6  # 40 steps are too few to find most goals by searching
    assert keeps[:, 1:].mean() > forgets[:, 1:].mean() + 0.3


def test_the_player_refuses_other_envs_and_bad_fields() -> None:
    env = metaworld_kshot(env_name="reach-v3", k=3, reset_signal=False)  # 39 features: no reset flag
    spec = from_spaces(env.observation_space, env.action_space)
    with pytest.raises(DataError, match=r"'reach-searcher' needs observation \(40,\)"):
        reach_searcher_policy(ReachSearcherConfig(), PolicyContext(spec=spec, n_envs=1))
    with pytest.raises(FieldError, match="at least 4 points"):
        ReachSearcherConfig(window=3)
