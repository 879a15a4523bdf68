"""Small real stores for the learning tests: synthetic episodes of chosen action kinds written to Zarr."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import Episode, TrajectoryStore


def make_spec(kind: str = "discrete", obs_dim: int = 3) -> DataSpec:
    """One vector observation and a discrete(3), continuous(2,) in [-2, 2], multidiscrete[2, 3] or multibinary(3,) action."""
    obs = {"observation": ArraySpec((obs_dim,), "float32")}
    if kind == "discrete":
        return DataSpec(obs, ActionSpec("discrete", (), n=3))
    if kind == "multidiscrete":
        return DataSpec(obs, ActionSpec("multidiscrete", (2,), nvec=(2, 3)))
    if kind == "multibinary":
        return DataSpec(obs, ActionSpec("multibinary", (3,)))
    return DataSpec(obs, ActionSpec("continuous", (2,), low=(-2.0, -2.0), high=(2.0, 2.0)))


def make_episode(spec: DataSpec, length: int, rng: np.random.Generator, *, terminated: bool = True) -> Episode:
    """An episode with random observations/actions; rewards equal 1 + the first action feature."""
    obs_dim = spec.observations["observation"].shape[0]
    obs = rng.normal(size=(length + 1, obs_dim)).astype(np.float32)
    if spec.action.kind == "discrete":
        actions = rng.integers(0, spec.action.n, size=length)
        rewards = (actions == 1).astype(np.float32)
    elif spec.action.kind == "multidiscrete":
        actions = np.stack([rng.integers(0, n, size=length) for n in spec.action.nvec], axis=-1)
        rewards = (actions[:, 0] == 1).astype(np.float32)
    elif spec.action.kind == "multibinary":
        actions = rng.integers(0, 2, size=(length, *spec.action.shape))
        rewards = actions[:, 0].astype(np.float32)
    else:
        actions = rng.uniform(-2.0, 2.0, size=(length, *spec.action.shape)).astype(np.float32)
        rewards = (actions[:, 0] > 0).astype(np.float32)
    ends = np.zeros(length, dtype=bool)
    ends[-1] = True
    return Episode(
        obs={"observation": obs},
        actions=actions,
        rewards=rewards,
        terminated=ends if terminated else np.zeros(length, dtype=bool),
        truncated=np.zeros(length, dtype=bool) if terminated else ends,
        env_name="synthetic",
    )


def make_store(
    path: Path,
    kind: str = "discrete",
    *,
    episodes: int = 12,
    lengths: tuple[int, int] = (5, 30),
    partition: str = "protected",
    seed: int = 0,
) -> TrajectoryStore:
    """A real Zarr store at `path` with `episodes` random episodes in `partition`."""
    spec = make_spec(kind)
    store = TrajectoryStore.create(path, spec, exist_ok=True)
    rng = np.random.default_rng(seed)
    with store.writer(partition) as writer:
        for i in range(episodes):
            writer.add(make_episode(spec, int(rng.integers(*lengths)), rng, terminated=i % 2 == 0))
    return store
