"""gymnax's MinAtar games as single gymnasium envs of one shared observation space, so several games can be a
task set (task sets step their tasks as separate envs, which gymnax's `already_vectorized` batch is not).

Each env is a batch of one `GymnaxVectorEnv` (one jitted step per call: slower than one batch of many, which is
what `mode: already_vectorized` with one game gives); the game's object channels are zero-padded to `channels`
(MinAtar's largest, Seaquest's 10), so every game shows a (10, 10, channels) float32 grid. The games' action
sets differ (3 to 6 actions); a task set joins them with an `action_mask`. Needs the `gymnax` extra.
gymnasium + numpy, no torch.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.errors import ConfigError, did_you_mean

GAMES = ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
"""The MinAtar games of gymnax (`<game>-MinAtar`)."""
MAX_CHANNELS = 10
"""Seaquest's object channels, the most of any MinAtar game."""


class MinAtarGame(gym.Env):  # type: ignore[type-arg]
    """One MinAtar game: observation (10, 10, `channels`) float32 in [0, 1] (the game's channels, then zeros),
    the game's own actions; gymnax's step limit truncates (`max_episode_steps` overrides it)."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, *, game: str = "Breakout", channels: int = MAX_CHANNELS, max_episode_steps: int | None = None):
        from amago_pipe.envs.gymnax import make_gymnax

        if game not in GAMES:
            raise ConfigError(
                f"env.kwargs.game: '{game}' is not a MinAtar game (known: {', '.join(GAMES)}){did_you_mean(game, GAMES)}",
                path="env.kwargs.game",
            )
        self.game = game
        self._env = make_gymnax(f"{game}-MinAtar", 1, max_episode_steps=max_episode_steps)
        shape = tuple(self._env.single_observation_space.shape or ())  # (10, 10, C)
        if channels < shape[-1]:
            raise ConfigError(
                f"env.kwargs.channels: {game} has {shape[-1]} object channels, so `channels` must be at least "
                f"that (default {MAX_CHANNELS}, every game's), got {channels}",
                path="env.kwargs.channels",
            )
        self._pad = channels - shape[-1]
        self.observation_space = gym.spaces.Box(0.0, 1.0, (*shape[:-1], channels), np.float32)
        self.action_space = self._env.single_action_space
        self._rng = np.random.default_rng()

    def _obs(self, batch: np.ndarray) -> np.ndarray:
        return np.pad(np.asarray(batch[0], np.float32), ((0, 0), (0, 0), (0, self._pad)))

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        obs, _ = self._env.reset(seed=int(self._rng.integers(2**31)))
        return self._obs(obs), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, _ = self._env.step(np.asarray([int(action)]))
        return self._obs(obs), float(reward[0]), bool(terminated[0]), bool(truncated[0]), {}

    def close(self) -> None:
        self._env.close()
