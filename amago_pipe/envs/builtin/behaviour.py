"""Scripted behaviour policies for the built-in envs (POLICIES entries): `tmaze-walker` and `key-door-explorer`,
which make datasets with both successes and failures and need no memory of the task, and `alchemy-player`, which
remembers what it saw across trials (demonstrations of in-context learning). numpy only, no torch.
"""

from __future__ import annotations

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.policies import AlchemyPlayerConfig, KeyDoorExplorerConfig, TmazeWalkerConfig
from amago_pipe.envs.builtin.alchemy import CASH, N_FEATURES, N_POTIONS
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


UNKNOWN = -2
"""`AlchemyPlayer.effect` entry of a colour not yet seen to move a stone."""


class AlchemyPlayer:
    """Symbolic Alchemy (with the reset flag): per env the effect (feature, sign) of each colour seen to move the
    stone; drinks a known potion that sets a wrong feature right, else an untried one, and cashes in at the target
    (or when no potion is left to try). Effects are kept for the episode's trials (`remember`) or cleared at each
    trial's first step; with probability `epsilon` a step is a uniformly random action instead."""

    def __init__(self, ctx: PolicyContext, *, remember: bool, epsilon: float):
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.remember, self.epsilon = remember, epsilon
        self.effect = np.zeros((0, N_POTIONS, 2), dtype=np.int64)  # (N, colour, (feature, sign))
        self.last_stone = np.zeros((0, N_FEATURES), dtype=np.int64)
        self.last_action = np.zeros(0, dtype=np.int64)

    def reset(self, n_envs: int) -> None:
        self.effect = np.full((n_envs, N_POTIONS, 2), UNKNOWN, dtype=np.int64)
        self.last_stone = np.zeros((n_envs, N_FEATURES), dtype=np.int64)
        self.last_action = np.full(n_envs, CASH, dtype=np.int64)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        if len(self.effect) != len(done_mask):
            self.reset(len(done_mask))
        self.effect[done_mask] = UNKNOWN  # a new episode: a new chemistry
        self.last_action[done_mask] = CASH

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        state = np.asarray(obs[DEFAULT_OBS_KEY])  # (N, 14): stone, target, potions left, step fraction, reset flag
        if len(self.effect) != len(state):
            self.reset(len(state))
        actions = np.empty(len(state), dtype=np.int64)
        for i, row in enumerate(state):
            stone, target = row[:N_FEATURES].astype(np.int64), row[N_FEATURES : 2 * N_FEATURES].astype(np.int64)
            left = row[2 * N_FEATURES : 2 * N_FEATURES + N_POTIONS] > 0
            first = row[-1] > 0.5  # the first step of a trial: a fresh stone
            if first and not self.remember:
                self.effect[i] = UNKNOWN
            moved = np.flatnonzero(stone != self.last_stone[i])
            if not first and self.last_action[i] < N_POTIONS and len(moved):
                self.effect[i, self.last_action[i]] = (moved[0], stone[moved[0]])
            actions[i] = self._choose(self.effect[i], stone, target, left)
            self.last_stone[i] = stone
        random_actions = self.rng.integers(0, N_POTIONS + 1, size=len(actions))
        actions = np.where(self.rng.random(len(actions)) < self.epsilon, random_actions, actions)
        self.last_action = actions
        return self.codec.to_unit(actions)

    @staticmethod
    def _choose(effect: np.ndarray, stone: np.ndarray, target: np.ndarray, left: np.ndarray) -> int:
        """The player's action from what it knows of the colours (effect (colour, 2)) and the stone (3,)."""
        wrong = stone != target  # (3,)
        if not wrong.any():
            return CASH
        feature, sign = effect[:, 0], effect[:, 1]
        known = left & (feature >= 0) & wrong[np.clip(feature, 0, None)] & (sign == target[np.clip(feature, 0, None)])
        untried = left & (feature == UNKNOWN)
        for choice in (known, untried):
            if choice.any():
                return int(np.flatnonzero(choice)[0])
        return CASH


def alchemy_player_policy(config: AlchemyPlayerConfig, ctx: PolicyContext) -> AlchemyPlayer:
    """Policy factory for `policy: {type: alchemy-player}` (Symbolic Alchemy with its reset flag)."""
    check_env_shape(
        ctx, name="alchemy-player", obs_shape=(2 * N_FEATURES + N_POTIONS + 2,), action=f"discrete({N_POTIONS + 1})"
    )
    return AlchemyPlayer(ctx, remember=config.remember, epsilon=config.epsilon)
