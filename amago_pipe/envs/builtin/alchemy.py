"""Symbolic Alchemy: a k-trial meta-RL task with hidden causal structure, redrawn per episode (a small stand-in
for DeepMind's Alchemy, whose package does not install here).

A stone is a corner of the cube {-1, +1}^3 (three features). Six potion colours each set one feature of the
stone to + or -; which colour does what — the chemistry — is a random assignment drawn per episode, and
`blocked_edges` edges of the cube may be cut (a potion then does nothing across them). A trial gives a fresh
stone and a target corner (both shown), and one potion of each colour; actions 0-5 drink a potion into the stone
(each costs `potion_cost`), action 6 cashes the stone in: reward 1 at the target, 0 elsewhere, and the trial
ends. Within one episode the chemistry stays fixed for `k` trials (KShot), so the colours' effects seen in
earlier trials let later ones reach the target with only the potions it needs; a memory-free policy has to
try potions anew every trial. gymnasium + numpy only.
"""

from __future__ import annotations

import itertools
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

from amago_pipe.envs.builtin.kshot import KEEP_TASK, KShot

N_FEATURES = 3
N_POTIONS = 2 * N_FEATURES
CASH = N_POTIONS
"""Action id that cashes the stone in (ends the trial)."""
EDGES = [(a, b) for a, b in itertools.combinations(range(2**N_FEATURES), 2) if bin(a ^ b).count("1") == 1]
"""The 12 edges of the cube, as pairs of corner ids (corner id: bit i set = feature i is +1)."""


class AlchemyTrial(gym.Env):  # type: ignore[type-arg]
    """One trial: a stone, a target, six potions, cash in. The chemistry (colour -> feature and sign) and the cut
    edges are drawn at `reset()` unless `options[KEEP_TASK]` (KShot's between trials); stone and target at every
    reset.

    Observation (float32, 3 + 3 + 6 + 1): the stone's features (+-1), the target's, which potions are left (1/0),
    the trial's step fraction. Info `success`: the stone was cashed at the target."""

    metadata: dict[str, Any] = {"render_modes": []}
    supports_keep_task: ClassVar[bool] = True

    def __init__(self, *, blocked_edges: int = 0, max_steps: int = 10, potion_cost: float = 0.05):
        if not 0 <= blocked_edges <= len(EDGES) - 1:
            raise ValueError(f"SymbolicAlchemy: blocked_edges must be in 0..{len(EDGES) - 1}, got {blocked_edges}")
        if max_steps < 1:
            raise ValueError(f"SymbolicAlchemy: max_steps must be at least 1, got {max_steps}")
        self.blocked_edges, self.max_steps, self.potion_cost = blocked_edges, max_steps, potion_cost
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2 * N_FEATURES + N_POTIONS + 1,), np.float32)
        self.action_space = gym.spaces.Discrete(N_POTIONS + 1)
        self._effect = np.zeros((N_POTIONS, 2), dtype=np.int64)  # (colour) -> (feature, sign)
        self._blocked: set[tuple[int, int]] = set()
        self._target = 0
        self._drawn = False
        self._stone = np.ones(N_FEATURES, dtype=np.int64)
        self._left = np.ones(N_POTIONS, dtype=bool)
        self._t = 0

    @property
    def task(self) -> np.ndarray:
        """The hidden structure (chemistry, cut edges) as numbers: KShot checks it stays fixed."""
        cut = np.zeros(len(EDGES))
        cut[[EDGES.index(e) for e in self._blocked]] = 1
        return np.concatenate([self._effect.ravel(), cut]).astype(np.float64)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        rng = self.np_random
        if not self._drawn or not (options or {}).get(KEEP_TASK, False):
            moves = [(f, s) for f in range(N_FEATURES) for s in (-1, 1)]
            self._effect = np.asarray([moves[i] for i in rng.permutation(N_POTIONS)], dtype=np.int64)
            cut = rng.choice(len(EDGES), size=self.blocked_edges, replace=False)
            self._blocked = {EDGES[int(i)] for i in cut}
            self._drawn = True
        self._target = int(rng.integers(2**N_FEATURES))
        self._stone = rng.choice([-1, 1], size=N_FEATURES).astype(np.int64)
        self._left[:] = True
        self._t = 0
        return self._obs(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        a = int(action)
        self._t += 1
        if a == CASH:
            hit = float(_corner(self._stone) == self._target)
            return self._obs(), hit, True, False, {"success": hit}
        reward = 0.0
        if 0 <= a < N_POTIONS and self._left[a]:
            self._left[a] = False
            self._drink(a)
            reward = -self.potion_cost
        truncated = self._t >= self.max_steps
        return self._obs(), reward, False, truncated, {"success": 0.0} if truncated else {}

    def _drink(self, colour: int) -> None:
        feature, sign = (int(v) for v in self._effect[colour])
        before = _corner(self._stone)
        moved = self._stone.copy()
        moved[feature] = sign
        after = _corner(moved)
        if before != after and (min(before, after), max(before, after)) not in self._blocked:
            self._stone = moved

    def _obs(self) -> np.ndarray:
        frac = [self._t / self.max_steps]
        target = _features(self._target)
        return np.concatenate([self._stone, target, self._left.astype(np.int64), frac]).astype(np.float32)


def _corner(features: np.ndarray) -> int:
    return int(sum(1 << i for i, f in enumerate(features) if f > 0))


def _features(corner: int) -> np.ndarray:
    return np.asarray([1 if corner >> i & 1 else -1 for i in range(N_FEATURES)], dtype=np.int64)


def make_symbolic_alchemy(
    *, k: int = 4, blocked_edges: int = 0, max_steps: int = 10, potion_cost: float = 0.05, reset_signal: bool = True
) -> KShot:
    """Symbolic Alchemy: `k` trials of at most `max_steps` steps at one hidden chemistry."""
    trial = AlchemyTrial(blocked_edges=blocked_edges, max_steps=max_steps, potion_cost=potion_cost)
    return KShot(trial, k, reset_signal=reset_signal)
