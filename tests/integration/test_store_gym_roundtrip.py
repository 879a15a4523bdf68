"""Real gymnasium rollouts of every space kind go into the store and come back bit-exact, also as windows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from amago_pipe.spec import flatten_obs, from_spaces
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.testing.episodes import assert_episodes_equal


class PixelsDictEnv(gym.Env):
    """Dict observation (uint8 image, Box, MultiBinary, Discrete) with a MultiDiscrete action."""

    def __init__(self) -> None:
        self.observation_space = spaces.Dict(
            {
                "pixels": spaces.Box(0, 255, (12, 12, 3), np.uint8),
                "agent": spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "keys": spaces.MultiBinary(3)}),
                "room": spaces.Discrete(4),
            }
        )
        self.action_space = spaces.MultiDiscrete([3, 2])
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._t += 1
        return self.observation_space.sample(), float(action.sum()), self._t >= 15, False, {}


def _rollout(env: gym.Env, seed: int, max_steps: int = 60) -> Episode:
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    env.observation_space.seed(seed)
    frames, actions, rewards, terms, truncs = [flatten_obs(obs)], [], [], [], []
    for _ in range(max_steps):
        action = env.action_space.sample()
        obs, reward, terminated, truncated, _ = env.step(action)
        frames.append(flatten_obs(obs))
        actions.append(action)
        rewards.append(reward)
        terms.append(terminated)
        truncs.append(truncated or len(actions) == max_steps)
        if terminated or truncs[-1]:
            break
    return Episode(
        obs={k: np.stack([f[k] for f in frames]) for k in frames[0]},
        actions=np.asarray(actions),
        rewards=np.asarray(rewards, dtype=np.float32),
        terminated=np.asarray(terms),
        truncated=np.asarray(truncs),
        env_name=str(env.spec.id if env.spec else type(env).__name__),
        source="rollout",
        meta={"seed": seed},
    )


@pytest.mark.parametrize("env_id", ["CartPole-v1", "Pendulum-v1", "FrozenLake-v1", "Blackjack-v1", "pixels-dict"])
def test_rollouts_round_trip_and_sample(tmp_path: Path, env_id: str) -> None:
    env = PixelsDictEnv() if env_id == "pixels-dict" else gym.make(env_id)
    spec = from_spaces(env.observation_space, env.action_space)
    episodes = [_rollout(env, seed) for seed in range(4)]
    for ep in episodes:  # the store keeps each dtype as the spec says
        ep.obs = {k: v.astype(spec.observations[k].dtype) for k, v in ep.obs.items()}
        ep.actions = ep.actions.astype(spec.action.dtype)
    store = TrajectoryStore.create(tmp_path / "s.zarr", spec)
    with store.writer("protected", atomic=True, attrs={"source": env_id}) as w:
        for ep in episodes:
            w.add(ep)
    reopened = TrajectoryStore.open(tmp_path / "s.zarr")
    assert reopened.segments("protected")[0].attrs == {"source": env_id}
    for i, (a, b) in enumerate(zip(episodes, reopened.iter_episodes("protected"), strict=True)):
        assert_episodes_equal(a, b, where=f"{env_id} episode {i}")

    seq_len = max(ep.length for ep in episodes)
    batch = reopened.sample(16, seq_len, rng=np.random.default_rng(0), mode="episodes")
    for b in range(16):  # whole episodes fit one window: each window is some episode, zero-padded
        n = int(batch.mask[b].sum())
        matches = [
            ep
            for ep in episodes
            if ep.length == n
            and np.array_equal(ep.actions, batch.actions[b, :n])
            and np.array_equal(ep.rewards, batch.rewards[b, :n])
            and all(np.array_equal(v, batch.obs[k][b, : n + 1]) for k, v in ep.obs.items())
        ]
        assert matches, f"window {b} matches no episode"
        for key, value in matches[0].obs.items():
            assert batch.obs[key].dtype == value.dtype and not batch.obs[key][b, n + 1 :].any()
