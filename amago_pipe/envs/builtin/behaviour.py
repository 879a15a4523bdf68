"""Scripted behaviour policies for the built-in envs: `tmaze-walker` and `key-door-explorer` (POLICIES entries).

They make datasets with both successes and failures and need no memory of the task. numpy only, no torch.
"""

from __future__ import annotations

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.policies import KeyDoorExplorerConfig, TmazeWalkerConfig
from amago_pipe.envs.builtin.tmaze import DOWN, LEFT, RIGHT, UP
from amago_pipe.envs.policies import PolicyContext, ScriptedPolicy, check_env_shape
from amago_pipe.spec import DEFAULT_OBS_KEY


def tmaze_walker(obs: dict[str, np.ndarray], rng: np.random.Generator) -> int:
    """TMaze: walk right; at the junction pick up or down uniformly at random (success rate 0.5)."""
    at_junction = float(np.asarray(obs[DEFAULT_OBS_KEY]).ravel()[1]) >= 0.5
    return int(rng.choice((UP, DOWN))) if at_junction else RIGHT


def tmaze_walker_policy(config: TmazeWalkerConfig, ctx: PolicyContext) -> ScriptedPolicy:
    """Policy factory for `policy: {type: tmaze-walker}` (`exploration:` adds random actions on top)."""
    check_env_shape(ctx, name="tmaze-walker", obs_shape=(2,), action="discrete(4)")
    return ScriptedPolicy(tmaze_walker, ctx, name="tmaze-walker")


class KeyDoorExplorer:
    """Sweeps the dark key-door room row by row (boustrophedon) from a random heading, with random moves.

    Per env it keeps a horizontal and a vertical heading: move along x until a wall, then one row along y
    (turning at the top/bottom wall) and reverse x. Headings are redrawn at the first step of each attempt
    (time-in-attempt observation 0). With probability `epsilon` a step is a uniformly random move instead.
    Reads only the position (walls at 0 and 1 of the normalized coordinates), so any room size works.
    """

    def __init__(self, ctx: PolicyContext, *, epsilon: float):
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.epsilon = epsilon
        self.heading_x = np.ones(0, dtype=np.int64)
        self.heading_y = np.ones(0, dtype=np.int64)

    def reset(self, n_envs: int) -> None:
        self.heading_x = self.rng.choice((-1, 1), size=n_envs)
        self.heading_y = self.rng.choice((-1, 1), size=n_envs)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        n = int(done_mask.sum())
        self.heading_x[done_mask] = self.rng.choice((-1, 1), size=n)
        self.heading_y[done_mask] = self.rng.choice((-1, 1), size=n)

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        state = np.asarray(obs[DEFAULT_OBS_KEY], dtype=np.float64)  # (N, 3 or 4)
        actions = np.empty(state.shape[0], dtype=np.int64)
        for i, (x, y, t) in enumerate(state[:, :3]):
            if t == 0.0:  # first step of an attempt: a fresh sweep
                self.heading_x[i], self.heading_y[i] = self.rng.choice((-1, 1), size=2)
            actions[i] = self._sweep(i, x, y)
        random_moves = self.rng.integers(0, 4, size=len(actions))
        return self.codec.to_unit(np.where(self.rng.random(len(actions)) < self.epsilon, random_moves, actions))

    def _sweep(self, i: int, x: float, y: float) -> int:
        """The next move of env i's sweep from normalized position (x, y); updates its headings."""
        hx, hy = int(self.heading_x[i]), int(self.heading_y[i])
        if (hx > 0 and x < 1.0) or (hx < 0 and x > 0.0):
            return RIGHT if hx > 0 else LEFT
        self.heading_x[i] = -hx
        if (hy > 0 and y >= 1.0) or (hy < 0 and y <= 0.0):
            hy = -hy
            self.heading_y[i] = hy
        return DOWN if hy > 0 else UP


def key_door_explorer_policy(config: KeyDoorExplorerConfig, ctx: PolicyContext) -> KeyDoorExplorer:
    """Policy factory for `policy: {type: key-door-explorer}` (Dark Key-To-Door, with or without reset flag)."""
    obs = ctx.spec.observations.get(DEFAULT_OBS_KEY)
    with_flag = obs is not None and obs.shape == (4,)
    check_env_shape(ctx, name="key-door-explorer", obs_shape=(4,) if with_flag else (3,), action="discrete(4)")
    return KeyDoorExplorer(ctx, epsilon=config.epsilon)
