"""Action conventions shared by policies, rollouts and training data: [-1, 1] <-> Box bounds, rl2 features.

Policies act in "policy space": integer ids for discrete kinds, [-1, 1] for continuous; environments and stored
episodes use "env space" (the Box bounds). Leaf module: numpy only (no torch, no gymnasium).
"""

from __future__ import annotations

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.spec import ActionSpec, describe_action


class ActionCodec:
    """Maps a batch of actions between policy space and env space and builds rl2 action features."""

    def __init__(self, spec: ActionSpec):
        self.spec = spec
        self.kind = spec.kind
        self.dim = spec.dim
        """Width of the rl2 action features (one-hot width for discrete kinds)."""
        if spec.kind == "continuous":
            low = np.asarray(spec.low, dtype=np.float64).reshape(spec.shape)
            high = np.asarray(spec.high, dtype=np.float64).reshape(spec.shape)
            self._bounded = np.isfinite(low) & np.isfinite(high)
            self._low = np.where(self._bounded, low, -1.0)
            self._high = np.where(self._bounded, high, 1.0)
        if spec.kind == "multidiscrete":
            self._offsets = np.concatenate([[0], np.cumsum(spec.nvec)[:-1]]).astype(np.int64)

    def to_env(self, actions: np.ndarray) -> np.ndarray:
        """Policy-space batch (N, ...) -> env-space batch; continuous values are clipped to [-1, 1] first."""
        actions = self._checked(actions)
        if self.kind != "continuous":
            return actions
        unit = np.where(self._bounded, np.clip(actions, -1.0, 1.0), actions)  # (N, *shape)
        env = self._low + (unit + 1.0) * 0.5 * (self._high - self._low)
        return np.where(self._bounded, env, actions).astype(np.float32)

    def to_unit(self, env_actions: np.ndarray) -> np.ndarray:
        """Env-space actions (..., *shape) -> policy space (int64 ids, or [-1, 1] for bounded continuous dims)."""
        env_actions = np.asarray(env_actions)
        if self.kind != "continuous":
            return env_actions.astype(np.int64)
        scale = np.where(self._high > self._low, self._high - self._low, 1.0)
        unit = np.clip(2.0 * (env_actions - self._low) / scale - 1.0, -1.0, 1.0)
        return np.where(self._bounded, unit, env_actions).astype(np.float32)

    def rl2_features(self, env_actions: np.ndarray) -> np.ndarray:
        """Env-space actions (..., *shape) -> float32 features (..., A): one-hot ids, bits, or [-1, 1] values."""
        env_actions = np.asarray(env_actions)
        lead = env_actions.shape[: env_actions.ndim - len(self.spec.shape)]
        if self.kind == "discrete":
            return np.eye(self.dim, dtype=np.float32)[env_actions.astype(np.int64)]  # (..., A)
        if self.kind == "multidiscrete":
            out = np.zeros((*lead, self.dim), dtype=np.float32)  # (..., sum(nvec))
            cols = env_actions.astype(np.int64) + self._offsets  # (..., k)
            np.put_along_axis(out, cols, 1.0, axis=-1)
            return out
        if self.kind == "multibinary":
            return env_actions.reshape(*lead, -1).astype(np.float32)
        return self.to_unit(env_actions).reshape(*lead, -1)

    def _checked(self, actions: np.ndarray) -> np.ndarray:
        """Validate a policy's batch: integer ids in range, or finite floats of the right shape."""
        actions = np.asarray(actions)
        n = actions.shape[0] if actions.ndim else 0
        want = (n, *self.spec.shape)
        if self.kind == "discrete" and actions.shape == (n, 1):
            actions = actions.reshape(n)
        if actions.ndim == 0 or actions.shape != want:
            raise DataError(
                f"policy returned actions of shape {actions.shape}; expected (n_envs, *{self.spec.shape}) = "
                f"{want} for {describe_action(self.spec)}"
            )
        if self.kind == "continuous":
            if not np.all(np.isfinite(actions)):
                raise DataError(f"policy returned non-finite continuous actions: {actions.tolist()[:4]}")
            return actions.astype(np.float32)
        if not np.issubdtype(actions.dtype, np.integer) and not np.all(np.equal(np.mod(actions, 1), 0)):
            raise DataError(
                f"policy returned non-integer actions {actions.tolist()[:4]} for {describe_action(self.spec)}"
            )
        ids = actions.astype(np.int64)
        upper = self._upper()
        if np.any(ids < 0) or np.any(ids >= upper):
            raise DataError(
                f"policy returned action ids {ids.tolist()[:8]} outside [0, {np.asarray(upper).tolist()}) "
                f"for {describe_action(self.spec)}"
            )
        return ids

    def _upper(self) -> np.ndarray | int:
        if self.kind == "discrete":
            return self.spec.n
        if self.kind == "multidiscrete":
            return np.asarray(self.spec.nvec, dtype=np.int64)
        return 2  # multibinary
