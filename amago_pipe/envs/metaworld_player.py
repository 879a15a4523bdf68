"""`reach-searcher`: a scripted player of k-shot Meta-World reach whose later attempts use what earlier ones found.

The goal of ML1 reach is hidden; only the reward (a falling function of the hand's distance to it) points there.
Per env the player fits the reward as a linear function of the hand position over its last `window` steps and
moves up that gradient (four probe moves start each search, a little random jitter keeps the fit well posed).
With `remember` it keeps the best-rewarded position of the episode and, from the second attempt on, first moves
straight back there, then searches on. Its episodes are demonstrations of in-context learning, as
`alchemy-player`'s are for Symbolic Alchemy: at 40-step attempts it succeeds ~0.3 in attempt 1 and ~0.9 in
attempts 2-3, against ~0.35 in every attempt when it forgets. Reads only observations and rewards. numpy only.
"""

from __future__ import annotations

import numpy as np

from amago_pipe.actions import ActionCodec
from amago_pipe.config.policies import ReachSearcherConfig
from amago_pipe.envs.policies import PolicyContext, check_env_shape
from amago_pipe.spec import DEFAULT_OBS_KEY

PROBES = np.array([[0.5, 0, 0], [0, 0.5, 0], [0, 0, 0.5], [-0.5, -0.5, -0.5]])
"""The first moves of a search (hand-position deltas in action units): four points fix an affine fit in 3-D."""
JITTER = 0.3
"""Standard deviation of the random part of each search move (action units)."""
HOME_RADIUS = 0.01
"""Metres from the remembered position at which homing ends and the search goes on."""
ACTION_PER_METRE = 100.0
"""Meta-World moves the hand ~1 cm per unit of action and step."""


class ReachSearcher:
    """The `reach-searcher` policy over N envs (observation: 39 Meta-World features + the reset flag)."""

    def __init__(self, ctx: PolicyContext, *, remember: bool, window: int, epsilon: float):
        self.codec = ActionCodec(ctx.spec.action)
        self.rng = np.random.default_rng(ctx.seed)
        self.remember, self.window, self.epsilon = remember, window, epsilon
        self.reset(ctx.n_envs)

    def reset(self, n_envs: int) -> None:
        self.points: list[list[tuple[np.ndarray, float]]] = [[] for _ in range(n_envs)]  # this attempt's (pos, r)
        self.best_reward = np.full(n_envs, -np.inf)
        self.best_pos = np.zeros((n_envs, 3))
        self.homing = np.zeros(n_envs, dtype=bool)

    def reset_envs(self, done_mask: np.ndarray) -> None:
        if len(self.points) != len(done_mask):
            self.reset(len(done_mask))
        self.best_reward[done_mask] = -np.inf  # a new episode: a new goal

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        state = np.asarray(obs[DEFAULT_OBS_KEY], dtype=np.float64)  # (N, 40)
        if len(self.points) != len(state):
            self.reset(len(state))
        moves = np.zeros((len(state), 3))
        for i, row in enumerate(state):
            moves[i] = self._move(i, row[:3], float(rl2[i, 0]), first=row[-1] > 0.5)
        noisy = self.rng.random(len(moves)) < self.epsilon
        moves[noisy] = self.rng.uniform(-1, 1, (int(noisy.sum()), 3))
        gripper = np.zeros((len(moves), 1))
        return self.codec.to_unit(np.concatenate([moves, gripper], axis=1))

    def _move(self, i: int, pos: np.ndarray, reward: float, *, first: bool) -> np.ndarray:
        """Env i's hand move from position (3,) and the reward of arriving there (unknown at an attempt's start)."""
        points = self.points[i]
        if first:
            points.clear()
            self.homing[i] = self.remember and np.isfinite(self.best_reward[i])
        else:
            points.append((pos, reward))
            if reward > self.best_reward[i]:
                self.best_reward[i], self.best_pos[i] = reward, pos
        if self.homing[i]:
            to_best = self.best_pos[i] - pos
            if np.linalg.norm(to_best) > HOME_RADIUS:
                return np.clip(to_best * ACTION_PER_METRE, -1.0, 1.0)
            self.homing[i] = False
            points.clear()
        if len(points) < len(PROBES):
            return PROBES[len(points)]
        move = _reward_gradient(points[-self.window :]) + JITTER * self.rng.normal(size=3)
        return move / max(1.0, float(np.abs(move).max()))


def _reward_gradient(points: list[tuple[np.ndarray, float]]) -> np.ndarray:
    """Unit direction of the least-squares gradient of reward over hand positions (zeros where it is flat)."""
    x = np.array([np.append(1.0, p) for p, _ in points])  # (W, 4): intercept, position
    r = np.array([reward for _, reward in points])
    grad = np.linalg.solve(x.T @ x + 1e-9 * np.eye(4), x.T @ r)[1:]
    norm = float(np.linalg.norm(grad))
    return grad / norm if norm > 0 else grad


def reach_searcher_policy(config: ReachSearcherConfig, ctx: PolicyContext) -> ReachSearcher:
    """Policy factory for `policy: {type: reach-searcher}` (Meta-World reach through `metaworld_kshot`)."""
    check_env_shape(ctx, name="reach-searcher", obs_shape=(40,), action="continuous(4,)")
    return ReachSearcher(ctx, remember=config.remember, window=config.window, epsilon=config.epsilon)
