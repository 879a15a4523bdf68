"""Dark Key-To-Door (after Algorithm Distillation): find a hidden key then a hidden door, k attempts per layout.

`KeyDoorRoom` is one attempt; `make_dark_key_door` wraps it in `KShot`. gymnasium + numpy only.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from amago_pipe.envs.builtin.kshot import KEEP_TASK, KShot

MOVES = np.array([[1, 0], [-1, 0], [0, -1], [0, 1]], dtype=np.int64)
"""(dx, dy) of actions 0 right, 1 left, 2 up, 3 down (same ids as TMaze)."""


class KeyDoorRoom(gym.Env):
    """One attempt in a dark `room_size` x `room_size` room: the key and door cells are hidden.

    Observation `(3,)` float32 in [0, 1]: `[x / (room_size - 1), y / (room_size - 1), t / episode_length]`
    (own position and time within the attempt; never the key or the door). Actions `Discrete(4)`: 0 right
    (x+1), 1 left, 2 up (y-1), 3 down; moves into a wall stay put. Reward 1 on first reaching the key cell and
    1 on reaching the door cell with the key, which ends the attempt (terminated); otherwise the attempt is
    truncated after `episode_length` steps. `info['success']` (door reached) is set on the last step.

    Layout (key, door: distinct cells) is drawn at `reset()` unless `options[KEEP_TASK]` is true (KShot sets
    it between attempts); the start cell is drawn at every reset among the cells that are neither.
    """

    metadata: dict[str, Any] = {"render_modes": []}
    supports_keep_task: ClassVar[bool] = True
    """KShot passes `options={KEEP_TASK: True}` between attempts, keeping the layout."""

    def __init__(self, *, room_size: int = 9, episode_length: int = 50):
        if room_size < 2:
            raise ValueError(f"KeyDoorRoom: room_size must be at least 2, got {room_size}")
        if episode_length < 1:
            raise ValueError(f"KeyDoorRoom: episode_length must be at least 1, got {episode_length}")
        self.room_size, self.episode_length = room_size, episode_length
        self.observation_space = gym.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self._drawn = False
        """A layout has been drawn (by a first reset)."""
        self._key = np.zeros(2, dtype=np.int64)
        self._door = np.zeros(2, dtype=np.int64)
        self._taken = (0, 0)
        """Cell indices (y * room_size + x) of the key and the door."""
        self._pos = np.zeros(2, dtype=np.int64)
        self._has_key = False
        self._t = 0

    @property
    def layout(self) -> tuple[tuple[int, int], tuple[int, int]]:
        """(key cell, door cell) as (x, y); raises before the first reset."""
        if not self._drawn:
            raise RuntimeError("KeyDoorRoom: call reset() before reading the layout")
        return (int(self._key[0]), int(self._key[1])), (int(self._door[0]), int(self._door[1]))

    @property
    def position(self) -> tuple[int, int]:
        return int(self._pos[0]), int(self._pos[1])

    def _cell(self, index: int) -> np.ndarray:
        """(x, y) of cell `index` = y * room_size + x."""
        return np.array(divmod(int(index), self.room_size)[::-1], dtype=np.int64)  # (x, y)

    def _obs(self) -> np.ndarray:
        xy = self._pos.astype(np.float32) / (self.room_size - 1)
        return np.array([xy[0], xy[1], self._t / self.episode_length], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        n = self.room_size * self.room_size
        if not self._drawn or not (options or {}).get(KEEP_TASK, False):
            key, door = (int(c) for c in self.np_random.choice(n, size=2, replace=False))
            self._key, self._door, self._taken, self._drawn = self._cell(key), self._cell(door), (key, door), True
        free = [c for c in range(n) if c not in self._taken]
        self._pos = self._cell(free[int(self.np_random.integers(len(free)))])
        self._has_key = False
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        self._pos = np.clip(self._pos + MOVES[int(action)], 0, self.room_size - 1)
        self._t += 1
        reward, terminated = 0.0, False
        if not self._has_key and np.array_equal(self._pos, self._key):
            self._has_key, reward = True, 1.0
        elif self._has_key and np.array_equal(self._pos, self._door):
            reward, terminated = 1.0, True
        truncated = not terminated and self._t >= self.episode_length
        info: dict[str, Any] = {"success": terminated} if terminated or truncated else {}
        return self._obs(), reward, terminated, truncated, info


def make_dark_key_door(
    *, room_size: int = 9, episode_length: int = 50, k: int = 10, reset_signal: bool = True
) -> KShot:
    """Dark Key-To-Door: `k` attempts of `episode_length` steps each at one layout, redrawn at `reset()`.

    Observation `(4,)` with the reset flag (`(3,)` without); at most `k * episode_length` steps, best return
    `2 * k`. Per-attempt returns in `info['amago_pipe/attempt_{i}_return']` (see `KShot`).
    """
    return KShot(KeyDoorRoom(room_size=room_size, episode_length=episode_length), k, reset_signal=reset_signal)
