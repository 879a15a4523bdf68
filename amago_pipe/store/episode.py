"""`Episode`: one episode (or a saved piece of one) as numpy arrays, and its validation against a DataSpec.

numpy only; must not import torch or click.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.spec import DataSpec, describe_action


@dataclass
class Episode:
    """T actions and T+1 observations. Discrete actions are integer ids; uint8 images stay uint8."""

    obs: dict[str, np.ndarray]
    """Observation arrays by flattened key, each (T+1, ...)."""
    actions: np.ndarray
    """(T,) int for discrete, (T, A) float32 for continuous, (T, A) int for multibinary/multidiscrete."""
    rewards: np.ndarray
    """(T,) rewards."""
    terminated: np.ndarray
    """(T,) bool: the step ended the episode in a terminal state (no bootstrapping)."""
    truncated: np.ndarray
    """(T,) bool: the step ended the episode by a time limit (bootstrapping continues)."""
    goals: dict[str, np.ndarray] = field(default_factory=dict)
    """Optional `achieved_goal` / `desired_goal`, each (T+1, G)."""
    env_name: str = ""
    source: str = ""
    time_start: int = 0
    """Absolute time index of obs[0]; pieces of long episodes keep their place in the episode."""
    meta: dict[str, Any] = field(default_factory=dict)
    """Free-form JSON metadata."""

    @property
    def length(self) -> int:
        """Number of steps T (actions)."""
        return int(np.shape(self.actions)[0]) if np.ndim(self.actions) else 0

    @property
    def total_return(self) -> float:
        """Sum of rewards, accumulated in float64."""
        return float(np.sum(np.asarray(self.rewards, dtype=np.float32), dtype=np.float64))

    def validate(self, spec: DataSpec, *, name: str = "episode") -> None:
        """Raise DataError naming the episode and the first key that does not fit `spec`."""
        where = _describe(self, name)
        length = self.length
        if length < 1:
            raise DataError(f"{where}: has no steps (actions shape {np.shape(self.actions)}); expected T >= 1 actions")
        _check_keys(where, "observations", set(self.obs), set(spec.observations))
        _check_keys(where, "goals", set(self.goals), set(spec.goals))
        for key, arr_spec in spec.observations.items():
            _check_array(where, f"observations['{key}']", self.obs[key], (length + 1, *arr_spec.shape), arr_spec.dtype)
        for key, arr_spec in spec.goals.items():
            _check_array(where, f"goals['{key}']", self.goals[key], (length + 1, *arr_spec.shape), arr_spec.dtype)
        for key in ("rewards", "terminated", "truncated"):
            arr = np.asarray(getattr(self, key))
            if arr.shape != (length,):
                raise DataError(f"{where}: {key} has shape {arr.shape}, expected ({length},) for T={length} actions")
            if arr.dtype.kind not in "biuf":
                raise DataError(f"{where}: {key} has dtype {arr.dtype}, expected a numeric or bool array")
        _check_actions(where, np.asarray(self.actions), spec, length)
        if not isinstance(self.time_start, int | np.integer) or int(self.time_start) < 0:
            raise DataError(f"{where}: time_start is {self.time_start!r}, expected a non-negative integer")
        try:
            json.dumps(self.meta)
        except (TypeError, ValueError) as e:
            raise DataError(
                f"{where}: meta is not JSON-serialisable ({e}); store plain dicts, lists, strings and numbers"
            ) from e


def _describe(ep: Episode, name: str) -> str:
    parts = [
        p for p in (f"env '{ep.env_name}'" if ep.env_name else "", f"source '{ep.source}'" if ep.source else "") if p
    ]
    return f"{name} ({', '.join(parts)})" if parts else name


def _check_keys(where: str, what: str, got: set[str], expected: set[str]) -> None:
    if got != expected:
        missing, extra = sorted(expected - got), sorted(got - expected)
        detail = "; ".join(
            p for p in (f"missing {missing}" if missing else "", f"unexpected {extra}" if extra else "") if p
        )
        raise DataError(f"{where}: {what} keys {sorted(got)} do not match the spec's {sorted(expected)} ({detail})")


def _check_array(where: str, what: str, value: Any, shape: tuple[int, ...], dtype: str) -> None:
    arr = np.asarray(value)
    if arr.shape != shape:
        raise DataError(f"{where}: {what} has shape {arr.shape}, expected {shape} (T+1 rows of the spec's shape)")
    if arr.dtype != np.dtype(dtype) and not np.can_cast(arr.dtype, np.dtype(dtype), casting="same_kind"):
        raise DataError(f"{where}: {what} has dtype {arr.dtype}, expected {dtype} (or a dtype that casts to it safely)")


def _check_actions(where: str, actions: np.ndarray, spec: DataSpec, length: int) -> None:
    act = spec.action
    expected = (length, *act.shape)
    if actions.shape != expected:
        hint = " (discrete actions are stored as integer ids, not one-hot)" if act.kind == "discrete" else ""
        raise DataError(
            f"{where}: actions have shape {actions.shape}, expected {expected} for {describe_action(act)}{hint}"
        )
    if act.kind == "continuous":
        if actions.dtype.kind not in "biuf":
            raise DataError(f"{where}: actions have dtype {actions.dtype}, expected float32 for {describe_action(act)}")
        return
    if actions.dtype.kind not in "biu":
        raise DataError(f"{where}: actions have dtype {actions.dtype}, expected integers for {describe_action(act)}")
    low, high = int(actions.min()), int(actions.max())
    if act.kind == "discrete" and (low < 0 or high >= act.n):
        raise DataError(f"{where}: discrete actions range over [{low}, {high}], expected ids in [0, {act.n - 1}]")
    if act.kind == "multibinary" and (low < 0 or high > 1):
        raise DataError(f"{where}: multibinary actions range over [{low}, {high}], expected 0 or 1")
    if act.kind == "multidiscrete":
        over = actions >= np.asarray(act.nvec)
        if low < 0 or bool(over.any()):
            raise DataError(
                f"{where}: multidiscrete actions out of range; expected 0 <= a[i] < nvec = {list(act.nvec)}"
            )
