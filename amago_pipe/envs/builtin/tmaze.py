"""`TMaze`: the passive T-Maze of Ni et al. 2023 — recall a cue seen at t=0 after walking a long corridor.

gymnasium + numpy only.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

RIGHT, LEFT, UP, DOWN = 0, 1, 2, 3
"""Action ids of `TMaze` (and of the key-door room)."""


class TMaze(gym.Env):
    """Passive T-Maze: the cue (+1 = up arm, -1 = down arm) is visible at t=0 only; choose its arm at the end.

    The agent starts at the left end (x=0) of a corridor; the junction is x=`corridor_length` (H).
    Observation `(2,)` float32: `[cue at t=0 (else 0, or N(0, distractor_std) noise), 1 at the junction]`
    (bounds [-1, 1], unbounded with noise).
    Actions `Discrete(4)`: 0 right, 1 left, 2 up, 3 down. Up/down at the junction picks an arm and ends the
    episode (terminated) with reward 1 for the cued arm, else 0. Every other step gets reward 0 when it moves
    right and `penalty` (default -1/H) when it does not (left, up/down in the corridor, right at the junction).
    The episode is truncated after `max_steps` actions (default H+1, the shortest episode). Optimal return 1
    in H+1 steps; a memory-free policy succeeds half the time. `info['success']` is set on the last step
    (False on truncation). The observation after an arm choice is zeros.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        *,
        corridor_length: int = 10,
        penalty: float | None = None,
        distractor_std: float = 0.0,
        max_steps: int | None = None,
    ):
        if corridor_length < 1:
            raise ValueError(f"TMaze: corridor_length must be at least 1, got {corridor_length}")
        if distractor_std < 0:
            raise ValueError(f"TMaze: distractor_std must be >= 0, got {distractor_std}")
        limit = corridor_length + 1 if max_steps is None else max_steps
        if limit < corridor_length + 1:
            raise ValueError(
                f"TMaze: max_steps={max_steps} is shorter than the shortest episode (corridor_length + 1 = "
                f"{corridor_length + 1}); raise it or leave it null"
            )
        self.corridor_length = corridor_length
        self.penalty = -1.0 / corridor_length if penalty is None else float(penalty)
        self.distractor_std = distractor_std
        self.max_steps = limit
        bound = np.inf if distractor_std > 0 else 1.0
        self.observation_space = gym.spaces.Box(-bound, bound, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self._t = 0
        self._x = 0
        self._cue = 1

    @property
    def cue(self) -> int:
        """The arm of the current episode: +1 (up) or -1 (down)."""
        return self._cue

    def _obs(self) -> np.ndarray:
        obs = np.zeros(2, dtype=np.float32)
        if self._t == 0:
            obs[0] = self._cue
        elif self.distractor_std > 0:
            obs[0] = self.np_random.normal(0.0, self.distractor_std)
        obs[1] = float(self._x == self.corridor_length)
        return obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        self._t = 0
        self._x = 0
        self._cue = 1 if self.np_random.integers(2) == 0 else -1
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        action = int(action)
        self._t += 1
        if self._x == self.corridor_length and action in (UP, DOWN):
            success = (1 if action == UP else -1) == self._cue
            return np.zeros(2, np.float32), float(success), True, False, {"success": success}
        reward = 0.0
        if action == RIGHT and self._x < self.corridor_length:
            self._x += 1
        else:
            reward = self.penalty
            if action == LEFT:
                self._x = max(self._x - 1, 0)
        truncated = self._t >= self.max_steps
        info: dict[str, Any] = {"success": False} if truncated else {}
        return self._obs(), reward, False, truncated, info
