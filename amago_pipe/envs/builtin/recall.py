"""`DelayedRecall`: name a cue shown once, `delay` steps later — the smallest test of long-term memory.

gymnasium + numpy only.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class DelayedRecall(gym.Env):
    """A cue (one of `n_cues`) is shown at t=0 only; after `delay` further steps the action must name it.

    Observation `(n_cues + 1,)` float32: the cue one-hot at t=0 (zeros later, plus Gaussian noise of std
    `distractor_std` on those dims after t=0), and a last dim that is 1 at the answer step. Actions:
    `Discrete(n_cues)`; only the action at the answer step (t = `delay`) matters. Reward 1 there when it
    names the cue, else 0; the episode then terminates (`delay + 1` actions). `info['success']` is set on
    the last step. A memory-free policy scores 1 / n_cues.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, *, n_cues: int = 4, delay: int = 30, distractor_std: float = 0.0):
        if n_cues < 2:
            raise ValueError(f"DelayedRecall: n_cues must be at least 2, got {n_cues}")
        if delay < 1:
            raise ValueError(f"DelayedRecall: delay must be at least 1, got {delay}")
        if distractor_std < 0:
            raise ValueError(f"DelayedRecall: distractor_std must be >= 0, got {distractor_std}")
        self.n_cues, self.delay, self.distractor_std = n_cues, delay, distractor_std
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (n_cues + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(n_cues)
        self._t = 0
        self._cue = 0

    def _obs(self) -> np.ndarray:
        obs = np.zeros(self.n_cues + 1, dtype=np.float32)
        if self._t == 0:
            obs[self._cue] = 1.0
        elif self.distractor_std > 0:
            obs[: self.n_cues] = self.np_random.normal(0.0, self.distractor_std, self.n_cues)
        obs[-1] = float(self._t == self.delay)
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._cue = int(self.np_random.integers(self.n_cues))
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        if self._t == self.delay:
            success = int(action) == self._cue
            self._t += 1
            return np.zeros(self.n_cues + 1, np.float32), float(success), True, False, {"success": success}
        self._t += 1
        return self._obs(), 0.0, False, False, {}
