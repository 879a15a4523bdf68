"""A small pixel env for the env-wrapper tests (`factory: pixel_env:make_pixel_env`, importable in CLI subprocesses
through tests/ on PYTHONPATH; registered as `pixel_env:PixelSide-v0`), and a plugin wrapper (`type: pixel_env:Invert`)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class PixelSideEnv(gym.Env):  # type: ignore[type-arg]
    """RGB frames (size, size, 3) uint8 with a red square on the left or right half; action 0/1 names the side
    (reward 1 when right). A new side each step, `length` steps per episode."""

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, size: int = 24, length: int = 6):
        self.size, self.length = size, length
        self.observation_space = gym.spaces.Box(0, 255, (size, size, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(2)
        self.side, self.t = 0, 0

    def _frame(self) -> np.ndarray:
        frame = np.full((self.size, self.size, 3), 40, np.uint8)
        half = self.size // 2
        lo = 2 if self.side == 0 else half + 2
        frame[half - 3 : half + 3, lo : lo + 6, 0] = 250
        return frame

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self.t, self.side = 0, int(self.np_random.integers(2))
        return self._frame(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        reward = float(int(action) == self.side)
        self.t += 1
        self.side = int(self.np_random.integers(2))
        return self._frame(), reward, self.t >= self.length, False, {}


def make_pixel_env(size: int = 24, length: int = 6) -> PixelSideEnv:
    return PixelSideEnv(size=size, length=length)


gym.register("PixelSide-v0", entry_point=make_pixel_env)  # `pixel_env:PixelSide-v0` for the CLI's ENV_ID


class Invert(gym.ObservationWrapper):  # type: ignore[type-arg]
    """A plugin wrapper of a uint8 Box observation: `255 - x`, optionally with `offset` added (clipped)."""

    def __init__(self, env: gym.Env, offset: int = 0):  # type: ignore[type-arg]
        super().__init__(env)
        self.offset = offset

    def observation(self, observation: Any) -> Any:
        return np.clip(255 - observation.astype(np.int16) + self.offset, 0, 255).astype(np.uint8)
