"""The `RolloutPolicy` protocol: what rollouts, collect and evaluate need from any policy (trained or not).

Typing only: imports numpy, nothing from torch, gymnasium or the store.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class RolloutPolicy(Protocol):
    """Anything that acts in a BatchedEnv; keeps per-env memory (KV cache / hidden state) between steps.

    Actions are in policy space: integer ids for discrete kinds, values in [-1, 1] for continuous actions
    (the env wrapper maps them to the Box bounds).
    """

    def reset(self, n_envs: int) -> None:
        """Start fresh for `n_envs` environments (clears all memory)."""

    def reset_envs(self, done_mask: np.ndarray) -> None:
        """Clear the memory of envs where `done_mask` (N,) is True: their next `act` is a first step."""

    def act(self, obs: dict[str, np.ndarray], rl2: np.ndarray, time: np.ndarray) -> np.ndarray:
        """Actions (N, ...) for obs {key: (N, ...)}, rl2 (N, 1+A) = [prev reward, prev action], time (N,)."""
        ...
