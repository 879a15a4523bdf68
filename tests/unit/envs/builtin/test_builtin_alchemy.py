"""Symbolic Alchemy: the hidden chemistry stays fixed for the k trials of an episode and is redrawn per episode;
what earlier trials reveal lets later ones reach the target with fewer potions (an oracle that remembers does,
one that forgets between trials does not)."""

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
    assert env.observation_space.shape == (14,) and env.action_space.n == N_POTIONS + 1  # type: ignore[attr-defined]
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


def oracle_episode(env: gym.Env, seed: int, *, remember: bool) -> list[float]:  # type: ignore[type-arg]
    """Drinks potions whose effect it has seen fix a wrong feature, else untried ones, and cashes in at the target;
    forgets what it saw at each trial unless `remember`. Returns each trial's return."""
    obs, _ = env.reset(seed=seed)
    effect: dict[int, tuple[int, int]] = {}  # colour -> (feature, sign), once seen to move the stone
    returns, current = [], 0.0
    while True:
        stone, goal, left = obs[:3].astype(int), obs[3:6].astype(int), obs[6:12] > 0
        wrong = {f for f in range(3) if stone[f] != goal[f]}
        known = [
            c
            for c in range(N_POTIONS)
            if left[c] and c in effect and effect[c][0] in wrong and effect[c][1] == goal[effect[c][0]]
        ]
        untried = [c for c in range(N_POTIONS) if left[c] and c not in effect]
        action = CASH if not wrong else (known or untried or [CASH])[0]
        obs, reward, terminated, truncated, info = env.step(action)
        current += float(reward)
        moved = np.flatnonzero(obs[:3].astype(int) != stone)
        if action < N_POTIONS and len(moved):
            effect[action] = (int(moved[0]), int(obs[moved[0]]))
        if "amago_pipe/attempts" in info and info["amago_pipe/attempts"] > len(returns):
            returns.append(current)
            current = 0.0
            if not remember:
                effect.clear()
        if terminated or truncated:
            return returns


def test_memory_of_earlier_trials_lifts_later_ones() -> None:
    env = make_symbolic_alchemy(k=4)
    keeps = np.asarray([oracle_episode(env, seed, remember=True) for seed in range(200)])  # (episodes, trials)
    forgets = np.asarray([oracle_episode(env, seed, remember=False) for seed in range(200)])
    assert keeps.shape == forgets.shape == (200, 4)
    assert keeps[:, 0].mean() == pytest.approx(forgets[:, 0].mean())  # trial 1: nothing to remember yet
    assert keeps[:, 1:].mean() > forgets[:, 1:].mean() + 0.05  # later trials use what earlier ones showed
    assert keeps[:, 3].mean() > keeps[:, 0].mean()
