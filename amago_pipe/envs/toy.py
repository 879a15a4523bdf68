"""Tiny deterministic gymnasium envs for tests: dict observations, random episode lengths, success/info keys.

`make_toy_env(...)` is a `module:factory` usable as `env: {factory: amago_pipe.envs.toy:make_toy_env}`.
gymnasium + numpy only.
"""

from __future__ import annotations

from typing import Any, Literal

import gymnasium as gym
import numpy as np


class ToyEnv(gym.Env):
    """Counts steps. obs = {'pos': (2,) float32, 'step': Discrete}, with `obs['step']` = time index.

    Each episode lasts a random length in [min_len, max_len]; it ends `terminated` when `terminate`,
    else it only ends by a TimeLimit. Reward is the env-space action (discrete id, or the sum of the Box
    action), so tests can check the action mapping. Infos: `success` (last step reached) and
    `amago_pipe/score` (= 10 * step).
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        *,
        min_len: int = 3,
        max_len: int = 6,
        action: Literal["discrete", "continuous"] = "discrete",
        low: float = -2.0,
        high: float = 4.0,
        terminate: bool = True,
    ):
        self.min_len, self.max_len, self.terminate = min_len, max_len, terminate
        self.observation_space = gym.spaces.Dict(
            {"pos": gym.spaces.Box(-np.inf, np.inf, (2,), np.float32), "step": gym.spaces.Discrete(10_000)}
        )
        if action == "discrete":
            self.action_space: gym.Space = gym.spaces.Discrete(3)
        else:
            self.action_space = gym.spaces.Box(np.float32(low), np.float32(high), (2,), np.float32)
        self._t = 0
        self._len = min_len

    def _obs(self) -> dict[str, Any]:
        pos = np.array([self._t, -self._t], dtype=np.float32)
        return {"pos": pos, "step": self._t}

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._len = int(self.np_random.integers(self.min_len, self.max_len + 1))
        return self._obs(), {"amago_pipe/score": 0.0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._t += 1
        reward = float(np.sum(action))
        at_end = self._t >= self._len
        info = {"success": bool(at_end), "amago_pipe/score": 10.0 * self._t}
        return self._obs(), reward, bool(at_end and self.terminate), False, info


def make_toy_env(**kwargs: Any) -> ToyEnv:
    """Factory for `env: {factory: amago_pipe.envs.toy:make_toy_env, kwargs: {...}}`."""
    return ToyEnv(**kwargs)
