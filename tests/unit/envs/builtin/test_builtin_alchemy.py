"""Symbolic Alchemy: the hidden chemistry and target stay fixed for the k trials of an episode, are redrawn per
episode, and what one trial reveals is enough to reach the target in the next (an oracle that remembers does)."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

from amago_pipe.envs.builtin.alchemy import CASH, N_POTIONS, AlchemyTrial, make_symbolic_alchemy


def test_passes_the_gymnasium_checker_and_registers() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(AlchemyTrial())
    env = gym.make("amago_pipe/SymbolicAlchemy-v0", k=3)
    assert env.observation_space.shape == (11,) and env.action_space.n == N_POTIONS + 1  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="blocked_edges must be in 0..11"):
        AlchemyTrial(blocked_edges=12)


def test_the_chemistry_is_kept_for_k_trials_and_redrawn_per_episode() -> None:
    env = make_symbolic_alchemy(k=4)
    env.reset(seed=0)
    task = env.unwrapped.task.copy()  # type: ignore[attr-defined]
    trials = 0
    while True:
        _, _, terminated, truncated, info = env.step(CASH)
        trials = info.get("amago_pipe/attempts", trials)
        assert np.array_equal(env.unwrapped.task, task)  # type: ignore[attr-defined]
        if terminated or truncated:
            break
    assert trials == 4
    drawn = {env.reset()[0].tobytes() and env.unwrapped.task.tobytes() for _ in range(10)}  # type: ignore[attr-defined]
    assert len(drawn) > 5


def oracle_episode(env: gym.Env, seed: int) -> list[float]:  # type: ignore[type-arg]
    """Keeps the corners consistent with every cash-in so far; once one is left it steers the stone there
    (potions whose effect it has seen first, then untried ones) and cashes in. Returns each trial's reward."""
    obs, _ = env.reset(seed=seed)
    corners = [np.array(c) for c in np.ndindex(2, 2, 2)]
    candidates = [2 * c - 1 for c in corners]  # the target is one of the 8 corners
    effect: dict[int, tuple[int, int]] = {}  # colour -> (feature, sign), once seen to move the stone
    rewards: list[float] = []
    while True:
        stone = obs[:3].astype(int)
        action = CASH
        if len(candidates) == 1 and not np.array_equal(stone, candidates[0]):
            goal = candidates[0]
            left = [c for c in range(N_POTIONS) if obs[3 + c] > 0]
            known = [c for c in left if c in effect and stone[effect[c][0]] != goal[effect[c][0]] == effect[c][1]]
            untried = [c for c in left if c not in effect]
            action = (known or untried or [CASH])[0]
        obs, reward, terminated, truncated, _ = env.step(action)
        moved = np.flatnonzero(obs[:3].astype(int) != stone)
        if action < N_POTIONS and len(moved):
            effect[action] = (int(moved[0]), int(obs[moved[0]]))
        if action == CASH:
            rewards.append(float(reward))
            candidates = [c for c in candidates if np.isclose(np.mean(c == stone), reward)]
        if terminated or truncated:
            return rewards


def test_memory_of_trial_one_lifts_later_trials() -> None:
    env = make_symbolic_alchemy(k=4)
    per_trial = np.asarray([oracle_episode(env, seed) for seed in range(200)])  # (episodes, trials)
    assert per_trial.shape == (200, 4)
    assert per_trial[:, 0].mean() == pytest.approx(0.5, abs=0.06)  # trial 1: the stone's share of the target
    assert per_trial[:, 1:].mean() > per_trial[:, 0].mean() + 0.1  # later trials use what trial 1 showed
