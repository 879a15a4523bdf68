"""Store partition → a new local Minari dataset (lossless: no JPEG), streamed in batches of episodes.

Converting the result back with the Minari converter gives identical arrays, time starts, env names and
metadata. numpy + gymnasium + minari (lazily); no torch, no click.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from amago_pipe.converters import minari_local
from amago_pipe.converters.minari_source import EXPORT_MARK, GOALS_INFO, META_PREFIX
from amago_pipe.converters.run import Progress

from amago_pipe.errors import DataError, Interrupted
from amago_pipe.gym_spaces import actions_like, spaces_from_json
from amago_pipe.spec import DEFAULT_OBS_KEY, KEY_SEP, ActionSpec, ArraySpec, DataSpec, flatten_space, nest_like

if TYPE_CHECKING:
    from amago_pipe.store import Episode

BATCH_TIMESTEPS = 50_000
"""Episodes are handed to Minari in batches of about this many timesteps (bounded memory)."""


@contextmanager
def minari_root(root: str | Path | None) -> Iterator[None]:
    """Temporarily point MINARI_DATASETS_PATH at `root` (no-op when None)."""
    if root is None:
        yield
        return
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(Path(root).expanduser().resolve())
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("MINARI_DATASETS_PATH", None)
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


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
    return spaces.Box(low=low, high=high, shape=spec.shape, dtype=dtype)


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
    """Write every episode of `partition` as Minari dataset `dataset_id`; returns a summary dict."""
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
    with minari_root(root):
        target = minari_local.datasets_root() / dataset_id
        if target.exists():
            if not force:
                raise DataError(
                    f"--dataset-id: a Minari dataset '{dataset_id}' already exists at {target}; "
                    f"choose another id (e.g. bump the version) or pass --force to replace it"
                )
            shutil.rmtree(target)
        if progress is not None:
            progress.update(total=info.timesteps)
        try:
            summary = _write(store, partition, dataset_id, description, author, progress, should_stop)
        except BaseException:
            shutil.rmtree(target, ignore_errors=True)
            raise
    summary.update(store=str(store_url), partition=partition, path=str(target))
    return summary


def _write(
    store: Any,
    partition: str,
    dataset_id: str,
    description: str | None,
    author: str | None,
    progress: Progress | None,
    should_stop: Any,
) -> dict[str, Any]:
    import minari
    from minari.data_collector import EpisodeBuffer

    obs_space, act_space = spaces_from_spec(store.spec)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dataset = minari.create_dataset_from_buffers(
            dataset_id,
            buffer=[],
            observation_space=obs_space,
            action_space=act_space,
            algorithm_name=EXPORT_MARK,
            author=author,
            description=description or f"exported by amago-pipe from store partition '{partition}'",
            jpeg_encoding=False,
        )
    batch: list[Any] = []
    metas: list[dict[str, Any]] = []
    pending, episodes, timesteps = 0, 0, 0
    for episode in store.iter_episodes(partition):
        if should_stop is not None and should_stop():
            raise Interrupted("export stopped on request; the partial Minari dataset was removed")
        batch.append(_buffer(episode, EpisodeBuffer, obs_space, act_space))
        metas.append(_episode_meta(episode))
        pending += episode.length
        episodes, timesteps = episodes + 1, timesteps + episode.length
        if progress is not None:
            progress.advance(episode.length)
        if pending >= BATCH_TIMESTEPS:
            dataset.storage.update_episodes(batch)
            batch, pending = [], 0
    if batch:
        dataset.storage.update_episodes(batch)
    dataset.storage.update_episode_metadata(metas, episode_indices=range(len(metas)))
    return {"dataset_id": dataset_id, "episodes": episodes, "timesteps": timesteps}


def _buffer(episode: Episode, buffer_cls: Any, obs_space: Any, act_space: Any) -> Any:
    infos = {GOALS_INFO: dict(episode.goals)} if episode.goals else None
    return buffer_cls(
        observations=nest_like(obs_space, episode.obs),
        actions=actions_like(np.asarray(episode.actions), act_space),
        rewards=np.asarray(episode.rewards),
        terminations=np.asarray(episode.terminated, dtype=bool),
        truncations=np.asarray(episode.truncated, dtype=bool),
        infos=infos,
    )


def _episode_meta(episode: Episode) -> dict[str, Any]:
    return {
        f"{META_PREFIX}time_start": int(episode.time_start),
        f"{META_PREFIX}env_name": episode.env_name,
        f"{META_PREFIX}source": episode.source,
        f"{META_PREFIX}meta": json.dumps(episode.meta),
    }
