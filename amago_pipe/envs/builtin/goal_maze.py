"""`GoalMaze`: a sparse-reward gridworld with goals in gymnasium-robotics' GoalEnv convention, for relabeling.

gymnasium + numpy only.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.envs.builtin.tmaze import DOWN, LEFT, RIGHT, UP

MOVES = {RIGHT: (1, 0), LEFT: (-1, 0), UP: (0, 1), DOWN: (0, -1)}
"""Action id -> (dx, dy)."""
MASK = -1.0
"""Value of the goals of a sequence that were already reached."""


def maze_walls(size: int, layout: str) -> np.ndarray:
    """(size, size) bool walls indexed [x, y]: `open` (none) or `rooms` (four rooms joined by one door each)."""
    walls = np.zeros((size, size), bool)
    if layout == "rooms":
        mid = size // 2
        walls[mid, :] = True
        walls[:, mid] = True
        for a, b in ((mid, mid // 2), (mid, (mid + size) // 2), (mid // 2, mid), ((mid + size) // 2, mid)):
            walls[a, b] = False
    return walls


class GoalMaze(gym.Env):
    """Reach the goal cell (or `n_goals` cells, in order) of a square gridworld; reward 1 per goal reached.

    Observation: Dict `observation` (4,) float32 (1 where the cell to the right/left/up/down is blocked),
    `achieved_goal` (2,) float32 (the agent's cell), `desired_goal` (2,) float32 — or (n_goals, 2) with the goals
    reached so far replaced by -1. Actions `Discrete(4)`: right, left, up, down (into a wall: no move).
    Start and goals are distinct random free cells. The episode terminates when the (last) goal is reached
    (`info['success']` True) and is truncated after `max_steps` (default 4 * size * n_goals). `compute_reward`
    follows the GoalEnv API on batches: 1 where the achieved and desired cells are the same, else 0.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(self, *, size: int = 9, n_goals: int = 1, layout: str = "rooms", max_steps: int | None = None):
        if size < 3:
            raise ValueError(f"GoalMaze: size must be at least 3, got {size}")
        if n_goals < 1:
            raise ValueError(f"GoalMaze: n_goals must be at least 1, got {n_goals}")
        if layout not in ("open", "rooms"):
            raise ValueError(f"GoalMaze: layout must be 'open' or 'rooms', got {layout!r}")
        self.size, self.n_goals = size, n_goals
        self.walls = maze_walls(size, layout)
        self.free = np.argwhere(~self.walls)
        if len(self.free) < n_goals + 1:
            raise ValueError(f"GoalMaze: {len(self.free)} free cells cannot hold a start and {n_goals} goals")
        self.max_steps = 4 * size * n_goals if max_steps is None else int(max_steps)
        goal_shape = (2,) if n_goals == 1 else (n_goals, 2)
        cell = gym.spaces.Box(0.0, float(size - 1), (2,), np.float32)
        self.observation_space = gym.spaces.Dict(
            {
                "observation": gym.spaces.Box(0.0, 1.0, (4,), np.float32),
                "achieved_goal": cell,
                "desired_goal": gym.spaces.Box(MASK, float(size - 1), goal_shape, np.float32),
            }
        )
        self.action_space = gym.spaces.Discrete(4)
        self._pos = np.zeros(2, np.int64)
        self._goals = np.zeros((n_goals, 2), np.int64)
        self._reached = 0
        self._t = 0

    def compute_reward(self, achieved_goal: Any, desired_goal: Any, info: Any) -> np.ndarray:
        """1.0 where the achieved cell equals the desired one (batched over leading axes), else 0.0."""
        gap = np.abs(np.asarray(achieved_goal, np.float32) - np.asarray(desired_goal, np.float32)).sum(-1)
        return (gap < 0.5).astype(np.float32)

    def _blocked(self, x: int, y: int) -> bool:
        return not (0 <= x < self.size and 0 <= y < self.size) or bool(self.walls[x, y])

    def _obs(self) -> dict[str, np.ndarray]:
        x, y = (int(v) for v in self._pos)
        around = [float(self._blocked(x + dx, y + dy)) for dx, dy in (MOVES[a] for a in (RIGHT, LEFT, UP, DOWN))]
        goals = self._goals.astype(np.float32)
        if self.n_goals > 1:
            goals[: self._reached] = MASK
        return {
            "observation": np.asarray(around, np.float32),
            "achieved_goal": self._pos.astype(np.float32),
            "desired_goal": goals[0] if self.n_goals == 1 else goals,
        }

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        cells = self.free[self.np_random.choice(len(self.free), size=self.n_goals + 1, replace=False)]
        self._pos, self._goals = cells[0].copy(), cells[1:].copy()
        self._reached, self._t = 0, 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        dx, dy = MOVES[int(action)]
        x, y = int(self._pos[0]) + dx, int(self._pos[1]) + dy
        if not self._blocked(x, y):
            self._pos = np.array([x, y], np.int64)
        self._t += 1
        reward = 0.0
        if (self._pos == self._goals[self._reached]).all():
            self._reached += 1
            reward = 1.0
        terminated = self._reached == self.n_goals
        truncated = not terminated and self._t >= self.max_steps
        info: dict[str, Any] = (
            {"success": terminated, "amago_pipe/goals_reached": self._reached} if terminated or truncated else {}
        )
        return self._obs(), reward, terminated, truncated, info
