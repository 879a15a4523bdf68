"""Goal rewards for relabeling: a distance threshold, a `module:function`, and the checks every source goes through.

A raw reward source has gymnasium-robotics' signature `compute_reward(achieved, desired, info) -> (N,)` on
batches. `CheckedReward` turns a wrong shape, dtype, NaN or exception into a DataError naming the episode and
the goal fields. numpy only (the env's own `compute_reward` is built in `amago_pipe.envs.goal_reward`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from amago_pipe.errors import AmagoPipeError, ConfigError, DataError
from amago_pipe.registry import import_path

RawReward = Callable[[np.ndarray, np.ndarray, dict[str, Any]], Any]
"""`compute_reward(achieved (N, *G), desired (N, *G), info) -> (N,)`."""


def threshold_reward(config: Any, *, where: str) -> RawReward:
    """`success_reward` when the Euclidean distance between achieved and desired goal is at most `distance`,
    else `failure_reward`."""
    distance, success, failure = float(config.distance), float(config.success_reward), float(config.failure_reward)

    def reward(achieved: np.ndarray, desired: np.ndarray, info: dict[str, Any]) -> np.ndarray:
        gap = np.asarray(achieved, np.float64) - np.asarray(desired, np.float64)
        dist = np.sqrt(np.sum(gap.reshape(len(gap), -1) ** 2, axis=1))
        return np.where(dist <= distance, success, failure).astype(np.float32)

    return reward


def function_reward(config: Any, *, where: str) -> RawReward:
    """The user's `package.module:function` with `compute_reward`'s signature."""
    fn = import_path(config.function, what="reward function", where=f"{where}.function")
    if not callable(fn):
        raise ConfigError(f"{where}.function: '{config.function}' is not callable", path=f"{where}.function")
    return fn  # type: ignore[no-any-return]


class CheckedReward:
    """A reward source whose every answer is checked: (N,) finite numbers for N goal pairs."""

    def __init__(self, raw: RawReward, *, name: str, achieved_key: str, desired_key: str):
        self.raw, self.name = raw, name
        self.achieved_key, self.desired_key = achieved_key, desired_key

    def for_episode(self, episode: str) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        """The checked reward, naming `episode` in its errors."""

        def reward(achieved: np.ndarray, desired: np.ndarray) -> np.ndarray:
            return self._call(achieved, desired, episode)

        return reward

    def _call(self, achieved: np.ndarray, desired: np.ndarray, episode: str) -> np.ndarray:
        n = len(achieved)
        fields = (
            f"'{self.achieved_key}' {achieved.shape} {achieved.dtype}, '{self.desired_key}' {desired.shape} "
            f"{desired.dtype}"
        )
        try:
            out = self.raw(achieved, desired, {})
        except AmagoPipeError:
            raise
        except Exception as e:
            raise DataError(
                f"{episode}: the reward function {self.name} failed on the goal fields ({fields}): "
                f"{type(e).__name__}: {e}; it must accept batches, like gymnasium-robotics' compute_reward"
            ) from e
        arr = np.asarray(out)
        if arr.shape != (n,):
            raise DataError(
                f"{episode}: the reward function {self.name} returned shape {arr.shape} for {n} goal pairs "
                f"({fields}); expected ({n},), one reward per pair"
            )
        if arr.dtype.kind not in "biuf":
            raise DataError(
                f"{episode}: the reward function {self.name} returned dtype {arr.dtype} ({fields}); expected numbers"
            )
        arr = arr.astype(np.float32)
        if not np.isfinite(arr).all():
            bad = int(np.flatnonzero(~np.isfinite(arr))[0])
            raise DataError(
                f"{episode}: the reward function {self.name} returned {arr[bad]} for goal pair {bad} ({fields}); "
                "rewards must be finite"
            )
        return arr
