"""Example DataSpecs (every space kind) and random Episodes for tests of stores, converters and loaders.

numpy only; must not import torch, click or pytest.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store.episode import Episode


def example_specs() -> dict[str, DataSpec]:
    """One spec per kind the store must round-trip: Box, Discrete, MultiBinary, MultiDiscrete, Dict, image."""
    vec = {"observation": ArraySpec((3,), "float32")}
    return {
        "box": DataSpec(vec, ActionSpec("continuous", (2,), low=(-1.0, -1.0), high=(1.0, 1.0))),
        "discrete": DataSpec({"observation": ArraySpec((4,), "float64")}, ActionSpec("discrete", (), n=3)),
        "multibinary": DataSpec({"observation": ArraySpec((5,), "int8")}, ActionSpec("multibinary", (4,), n=4)),
        "multidiscrete": DataSpec(
            {"observation": ArraySpec((), "int64")}, ActionSpec("multidiscrete", (2,), nvec=(3, 5))
        ),
        "dict": DataSpec(
            {
                "agent/pos": ArraySpec((2,), "float32"),
                "agent/flags": ArraySpec((3,), "bool"),
                "inventory": ArraySpec((4,), "int16"),
                "scalar": ArraySpec((), "float64"),
            },
            ActionSpec("discrete", (), n=5),
        ),
        "image": DataSpec(
            {"pixels": ArraySpec((8, 8, 3), "uint8"), "state": ArraySpec((2,), "float32")},
            ActionSpec("continuous", (1,), low=(-1.0,), high=(1.0,)),
        ),
        "goals": DataSpec(
            vec,
            ActionSpec("continuous", (2,), low=(-1.0, -1.0), high=(1.0, 1.0)),
            goals={"achieved_goal": ArraySpec((2,), "float32"), "desired_goal": ArraySpec((2,), "float32")},
        ),
    }


def _random_array(rng: np.random.Generator, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return rng.integers(max(info.min, -100), min(info.max, 250), size=shape, endpoint=True).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def random_actions(spec: DataSpec, length: int, rng: np.random.Generator) -> np.ndarray:
    """(T, ...) valid actions for the spec's action space."""
    act = spec.action
    if act.kind == "discrete":
        return rng.integers(0, act.n, size=length).astype(np.int64)
    if act.kind == "multibinary":
        return rng.integers(0, 2, size=(length, *act.shape)).astype(np.int64)
    if act.kind == "multidiscrete":
        return np.stack([rng.integers(0, n, size=length) for n in act.nvec], axis=1).astype(np.int64)
    return rng.uniform(-1, 1, size=(length, *act.shape)).astype(np.float32)


def random_episode(
    spec: DataSpec,
    length: int,
    rng: np.random.Generator,
    *,
    time_start: int = 0,
    terminated: bool = True,
    env_name: str = "",
    source: str = "",
    meta: dict[str, Any] | None = None,
) -> Episode:
    """An episode of `length` steps with random data fitting `spec`; ends terminated (or truncated)."""
    obs = {k: _random_array(rng, (length + 1, *a.shape), a.dtype) for k, a in spec.observations.items()}
    goals = {k: _random_array(rng, (length + 1, *a.shape), a.dtype) for k, a in spec.goals.items()}
    ends = np.zeros(length, dtype=bool)
    ends[-1] = True
    return Episode(
        obs=obs,
        actions=random_actions(spec, length, rng),
        rewards=rng.standard_normal(length).astype(np.float32),
        terminated=ends.copy() if terminated else np.zeros(length, dtype=bool),
        truncated=np.zeros(length, dtype=bool) if terminated else ends.copy(),
        goals=goals,
        env_name=env_name,
        source=source,
        time_start=time_start,
        meta=dict(meta or {}),
    )


def counting_episode(spec: DataSpec, length: int, first: int, *, time_start: int = 0) -> Episode:
    """An episode whose rewards are `first, first+1, ...`: windows can be traced back to their rows.

    Every float observation and continuous action holds the same running number as the reward.
    """
    rng = np.random.default_rng(first)
    ep = random_episode(spec, length, rng, time_start=time_start)
    steps = np.arange(first, first + length + 1, dtype=np.float64)
    ep.rewards = steps[:-1].astype(np.float32)
    for key, arr in ep.obs.items():
        if arr.dtype.kind == "f":
            ep.obs[key] = np.broadcast_to(steps.reshape(-1, *([1] * (arr.ndim - 1))), arr.shape).astype(arr.dtype)
    return ep


def assert_episodes_equal(a: Episode, b: Episode, *, where: str = "episode") -> None:
    """Raise AssertionError naming the first field in which two episodes differ (bit-exact, dtypes included)."""
    pairs: list[tuple[str, Any, Any]] = [
        *((f"obs['{k}']", a.obs.get(k), b.obs.get(k)) for k in sorted(set(a.obs) | set(b.obs))),
        *((f"goals['{k}']", a.goals.get(k), b.goals.get(k)) for k in sorted(set(a.goals) | set(b.goals))),
        ("actions", a.actions, b.actions),
        ("rewards", np.asarray(a.rewards, np.float32), np.asarray(b.rewards, np.float32)),
        ("terminated", np.asarray(a.terminated, bool), np.asarray(b.terminated, bool)),
        ("truncated", np.asarray(a.truncated, bool), np.asarray(b.truncated, bool)),
    ]
    for name, x, y in pairs:
        if x is None or y is None:
            raise AssertionError(f"{where}: {name} present in only one episode")
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape or x.dtype != y.dtype or not np.array_equal(x, y):
            raise AssertionError(f"{where}: {name} differs ({x.shape} {x.dtype} vs {y.shape} {y.dtype})")
    for name in ("env_name", "source", "time_start", "meta"):
        if getattr(a, name) != getattr(b, name):
            raise AssertionError(f"{where}: {name} differs ({getattr(a, name)!r} vs {getattr(b, name)!r})")
