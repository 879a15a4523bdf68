"""The `alchemy-player` collect policy: remembering what the colours did lifts later trials; forgetting does not."""

from __future__ import annotations

import numpy as np

from amago_pipe.config.policies import AlchemyPlayerConfig
from amago_pipe.envs.builtin.alchemy import make_symbolic_alchemy
from amago_pipe.envs.builtin.behaviour import alchemy_player_policy
from amago_pipe.envs.policies import PolicyContext
from amago_pipe.spec import from_spaces


def _trial_returns(remember: bool, episodes: int = 150) -> np.ndarray:
    """(episodes, 4) return of each trial, the player acting on one env through the policy interface."""
    env = make_symbolic_alchemy(k=4)
    spec = from_spaces(env.observation_space, env.action_space)
    policy = alchemy_player_policy(AlchemyPlayerConfig(remember=remember), PolicyContext(spec=spec, n_envs=1))
    out = np.zeros((episodes, 4))
    for e in range(episodes):
        obs, _ = env.reset(seed=e)
        policy.reset_envs(np.ones(1, dtype=bool))
        trial, done = 0, False
        while not done:
            action = int(policy.act({"observation": obs[None]}, np.zeros((1, 8)), np.zeros(1))[0])
            obs, reward, terminated, truncated, info = env.step(action)
            out[e, trial] += reward
            done = terminated or truncated
            trial = min(int(info.get("amago_pipe/attempts", trial)), 3)
    return out


def test_remembering_lifts_later_trials_and_forgetting_does_not() -> None:
    keeps, forgets = _trial_returns(True), _trial_returns(False)
    assert abs(keeps[:, 0].mean() - forgets[:, 0].mean()) < 1e-9  # trial 1: nothing to remember yet
    assert keeps[:, 1:].mean() > forgets[:, 1:].mean() + 0.15
    assert 2.6 < keeps.sum(1).mean() < 3.1 and 1.3 < forgets.sum(1).mean() < 1.7  # the scripted references
