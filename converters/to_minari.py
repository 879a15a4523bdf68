"""Store partition → a new local Minari dataset (lossless: no JPEG), written by `minari_writer`.

Converting the result back with the Minari converter gives identical arrays, time starts, env names and
metadata. numpy + gymnasium + minari (lazily); no torch, no click.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.errors import DataError, Interrupted
from amago_pipe.gym_spaces import spaces_from_json
from amago_pipe.progress import Progress
from amago_pipe.spec import DEFAULT_OBS_KEY, KEY_SEP, ActionSpec, ArraySpec, DataSpec, flatten_space

from . import minari_local, minari_writer

if TYPE_CHECKING:
    from amago_pipe.store import Episode


def spaces_from_spec(spec: DataSpec) -> tuple[Any, Any]:
    """Gymnasium (observation, action) spaces for a DataSpec: the recorded ones when it has them (and they fit
    its keys), else inferred ('/'-joined keys become nested Dict spaces)."""
    from gymnasium import spaces

    if spec.spaces is not None:
        recorded = spaces_from_json(spec.spaces)
        if flatten_space(recorded[0]) == spec.observations:
            return recorded
    leaves = {k: _box(v) for k, v in spec.observations.items()}
    if set(leaves) == {DEFAULT_OBS_KEY}:
        obs_space: Any = leaves[DEFAULT_OBS_KEY]
    else:
        obs_space = _nest_spaces(leaves)
    return obs_space, _action_space(spec.action, spaces)


def _box(spec: ArraySpec) -> Any:
    from gymnasium import spaces

    dtype = np.dtype(spec.dtype)
    if dtype.kind == "f":
        low = -np.inf if spec.low is None else spec.low
        high = np.inf if spec.high is None else spec.high
    elif dtype.kind == "b":
        low, high = 0, 1
    else:
        info = np.iinfo(dtype)
        low = info.min if spec.low is None else int(spec.low)
        high = info.max if spec.high is None else int(spec.high)
    return spaces.Box(low=low, high=high, shape=spec.shape, dtype=dtype.type)


def _nest_spaces(leaves: dict[str, Any]) -> Any:
    from gymnasium import spaces

    tree: dict[str, Any] = {}
    for key, space in leaves.items():
        node = tree
        *parents, leaf = key.split(KEY_SEP)
        for p in parents:
            child = node.setdefault(p, {})
            if not isinstance(child, dict):
                raise DataError(f"observation keys '{p}' and '{key}' clash: one cannot be both a value and a group")
            node = child
        if leaf in node:
            raise DataError(f"observation key '{key}' clashes with a group of the same name")
        node[leaf] = space

    def build(node: dict[str, Any]) -> Any:
        return spaces.Dict({k: build(v) if isinstance(v, dict) else v for k, v in node.items()})

    return build(tree)


def _action_space(action: ActionSpec, spaces: Any) -> Any:
    if action.kind == "discrete":
        return spaces.Discrete(action.n)
    if action.kind == "multibinary":
        return spaces.MultiBinary(list(action.shape) if len(action.shape) > 1 else action.n)
    if action.kind == "multidiscrete":
        return spaces.MultiDiscrete(list(action.nvec))
    low = np.asarray(action.low, np.float32).reshape(action.shape) if action.low else -np.inf
    high = np.asarray(action.high, np.float32).reshape(action.shape) if action.high else np.inf
    return spaces.Box(low=low, high=high, shape=action.shape, dtype=np.float32)


def _check_id(dataset_id: str) -> None:
    from minari.dataset.minari_dataset import parse_dataset_id

    try:
        parse_dataset_id(dataset_id)
    except (ValueError, TypeError) as e:
        raise DataError(
            f"--dataset-id: '{dataset_id}' is not a Minari dataset id; expected 'namespace/name-v0' "
            f"(letters, digits, '-', '_', a namespace of 2+ characters, and a version suffix -v<N>): {e}"
        ) from e


def export_to_minari(
    store_url: str | Path,
    partition: str,
    dataset_id: str,
    *,
    root: str | Path | None = None,
    force: bool = False,
    description: str | None = None,
    author: str | None = None,
    progress: Progress | None = None,
    should_stop: Any = None,
) -> dict[str, Any]:
    """Write every episode of `partition` as Minari dataset `dataset_id`; returns a summary dict.

    `force` replaces a dataset of that id only if amago-pipe made it; nothing is written unless it all is.
    """
    from amago_pipe.store import TrajectoryStore

    minari_local.import_minari()
    store = TrajectoryStore.open(store_url)
    if partition not in store.partitions():
        raise DataError(
            f"--partition: store {store_url} has no partition '{partition}' (it has: "
            f"{', '.join(store.partitions()) or 'none'}); pick one of those"
        )
    info = store.partition_info(partition)
    if info.episodes == 0:
        raise DataError(f"partition '{partition}' of {store_url} is empty; nothing to export")
    _check_id(dataset_id)
    obs_space, act_space = spaces_from_spec(store.spec)
    counts = {"episodes": 0, "timesteps": 0}

    def episodes() -> Iterator[Episode]:
        for episode in store.iter_episodes(partition):
            if should_stop is not None and should_stop():
                raise Interrupted("export stopped on request; no Minari dataset was written")
            counts["episodes"] += 1
            counts["timesteps"] += episode.length
            if progress is not None:
                progress.advance(episode.length)
            yield episode

    with minari_local.minari_root(root), minari_writer.dataset_lock(dataset_id, where="--dataset-id"):
        problem = minari_writer.target_conflict(dataset_id, replace=force, how_to_replace="pass --force")
        if problem:
            raise DataError(f"--dataset-id: {problem}")
        if progress is not None:
            progress.update(total=info.timesteps)
        path = minari_writer.write_minari_dataset(
            dataset_id,
            episodes(),
            observation_space=obs_space,
            action_space=act_space,
            description=description or f"exported by amago-pipe from store partition '{partition}'",
            author=author,
        )
    return {"dataset_id": dataset_id, **counts, "store": str(store_url), "partition": partition, "path": str(path)}
