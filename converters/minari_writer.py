"""The one Minari writer: episodes → a new local Minari dataset, streamed, all or nothing, one writer per id.

The dataset is built in a hidden staging folder of the Minari root, in batches of about `BATCH_TIMESTEPS`
(bounded memory), then renamed into place, so an interrupted or killed write never leaves a half-written
dataset behind. An flock per dataset id (released by the kernel when its holder dies) makes a second writer
of one id fail fast. Every dataset gets `MARK` as its `algorithm_name` (only datasets marked by amago-pipe are
ever replaced) and per-episode `META_PREFIX` attributes, so the Minari converter reads it back losslessly.
Uses minari's buffer API (not DataCollector, which needs jax). numpy + gymnasium + minari (lazily); no torch.
h5py crashes the process when a write fails for lack of space, so each batch is checked against the free disk space
and the file-size limit first (`check_room`): an OutOfSpaceError naming the dataset, nothing left behind.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import resource
import shutil
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.errors import AmagoPipeError, ConfigError, DataError, LockError, out_of_space, out_of_space_error
from amago_pipe.gym_spaces import actions_like
from amago_pipe.hashing import hash_tree
from amago_pipe.spec import nest_like

from . import minari_local

if TYPE_CHECKING:
    from amago_pipe.store import Episode

MARK = "amago-pipe"
"""`algorithm_name` of every dataset written here."""
OLD_EXPORT_MARK = "amago-pipe store export"
"""Mark of datasets written by `store to-minari` before the writers were merged (they hold episode metadata)."""
OLD_COLLECT_MARK = "amago-pipe collect"
"""Mark of datasets written by `collect` before the writers were merged (no episode metadata)."""
OWN_MARKS = (MARK, OLD_EXPORT_MARK, OLD_COLLECT_MARK)
"""Datasets whose `algorithm_name` is one of these were made by amago-pipe: they may be replaced."""
METADATA_MARKS = (MARK, OLD_EXPORT_MARK)
"""Datasets whose episodes carry the `META_PREFIX` attributes."""
META_PREFIX = "amago_"
"""Per-episode attributes written here: `amago_time_start`, `amago_env_name`, `amago_source`, `amago_meta` (JSON)."""
GOALS_INFO = "amago_goals"
"""Info group holding an episode's goal fields (restored as goals by the Minari converter)."""
BATCH_TIMESTEPS = 50_000
"""Episodes are handed to Minari in batches of about this many timesteps."""
HDF5_ARRAY_BYTES = 4096
"""Room counted per array of an episode on top of its data (HDF5 dataset header, chunk index, attributes: measured
about 3 kB); over-counting only refuses a write that would leave the disk nearly full."""
WORK_DIR = ".amago-pipe"
"""Hidden folder of the Minari root (Minari's listing skips it) with the per-id locks and staging folders."""


def minari_dataset_path(dataset_id: str) -> Path:
    """Folder of the local Minari dataset `dataset_id` (honours MINARI_DATASETS_PATH)."""
    return minari_local.datasets_root() / dataset_id


def _work_path(kind: str, dataset_id: str) -> Path:
    """`<root>/.amago-pipe/<kind>/<id with '/' as '~'>`: one lock, staging or old copy per dataset id."""
    return minari_local.datasets_root() / WORK_DIR / kind / dataset_id.replace("/", "~")


def dataset_mark(path: Path) -> str | None:
    """The `algorithm_name` in a dataset folder's metadata; None when missing or unreadable."""
    try:
        name = json.loads((path / "data" / "metadata.json").read_text()).get("algorithm_name")
    except (OSError, ValueError, AttributeError):
        return None
    return None if name is None else str(name)


def target_conflict(dataset_id: str, *, replace: bool, how_to_replace: str) -> str | None:
    """Why `dataset_id` may not be written (it exists and is not ours to replace), or None when it may."""
    path = minari_dataset_path(dataset_id)
    if not path.exists():
        return None
    mark = dataset_mark(path)
    if mark in OWN_MARKS:
        if replace:
            return None
        why = f"{how_to_replace} to replace it"
    elif mark is None:
        why = (
            "its data/metadata.json is missing, unreadable or names no algorithm (an interrupted write?), "
            "so it is never replaced"
        )
    else:
        why = f"it was not made by amago-pipe (algorithm_name '{mark}'), so it is never replaced"
    return (
        f"a Minari dataset '{dataset_id}' already exists at {path}; {why}. "
        "Pick another dataset id (e.g. bump the version suffix) or delete that folder"
    )


def check_dataset_target(dataset_id: str, *, replace: bool, where: str) -> None:
    """Raise ConfigError at `where` unless `dataset_id` is free, or made by amago-pipe and `replace` is set."""
    problem = target_conflict(dataset_id, replace=replace, how_to_replace="set `replace: true` (or --overwrite)")
    if problem:
        raise ConfigError(f"{where}: {problem}", path=where)


@contextlib.contextmanager
def dataset_lock(dataset_id: str, *, where: str) -> Iterator[None]:
    """Hold the dataset id's lock; LockError naming the holder when another process has it."""
    path = _work_path("locks", dataset_id + ".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise LockError(
                f"{where}: Minari dataset '{dataset_id}' is being written by another amago-pipe collect or export "
                f"(pid {holder}); wait for it to finish, or pick another dataset id"
            ) from e
        f.truncate(0)
        f.write(str(os.getpid()))
        f.flush()
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def write_minari_dataset(
    dataset_id: str,
    episodes: Iterable[Episode],
    *,
    observation_space: Any,
    action_space: Any,
    env_spec: Any = None,
    description: str | None = None,
    author: str | None = None,
) -> Path:
    """Create (or replace) the local Minari dataset `dataset_id` from `episodes` (exact arrays: no JPEG).

    Call it inside `dataset_lock(dataset_id)` after `target_conflict`: the staging and old-copy folders are
    that id's own. Whatever `episodes` raises propagates, with the staging folder removed and any previous
    dataset left in place. Returns the dataset folder.
    """
    minari_local.import_minari()
    staging, old = _work_path("staging", dataset_id), _work_path("old", dataset_id)
    target = minari_dataset_path(dataset_id)
    shutil.rmtree(staging, ignore_errors=True)  # a killed earlier write's leftovers
    shutil.rmtree(old, ignore_errors=True)
    moved = False
    try:
        with minari_local.minari_root(staging):
            spaces = (observation_space, action_space)
            about = (description or f"written by {MARK}", author or MARK)
            _write(dataset_id, episodes, spaces, env_spec, about, target)
        _ensure_namespace(dataset_id)
        if target.exists():
            old.parent.mkdir(parents=True, exist_ok=True)
            os.replace(target, old)
            moved = True
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging / dataset_id, target)
    except BaseException as e:
        if moved and not target.exists():  # put the previous dataset back
            os.replace(old, target)
        if isinstance(e, Exception) and not isinstance(e, AmagoPipeError) and out_of_space(e) is not None:
            raise out_of_space_error(target, e, kept="nothing was written") from e
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return target


def _write(
    dataset_id: str,
    episodes: Iterable[Episode],
    spaces: tuple[Any, Any],
    env_spec: Any,
    about: tuple[str, str],
    target: Path,
) -> None:
    """Create the (empty) dataset under the current Minari root (`about`: description, author), then append
    `episodes` batch by batch (`target`: where it will be, named when there is no room)."""
    import minari

    obs_space, act_space = spaces
    description, author = about
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # optional metadata (code_permalink, author_email) missing
        storage = minari.create_dataset_from_buffers(
            dataset_id,
            buffer=[],
            env=env_spec,
            eval_env=env_spec,
            algorithm_name=MARK,
            author=author,
            description=description,
            jpeg_encoding=False,
            observation_space=obs_space,
            action_space=act_space,
        ).storage
    batch: list[Episode] = []
    written = pending = 0
    for episode in episodes:
        batch.append(episode)
        pending += episode.length
        if pending >= BATCH_TIMESTEPS:
            written = _flush(storage, batch, written, spaces, target)
            batch, pending = [], 0
    if batch:
        written = _flush(storage, batch, written, spaces, target)
    if written == 0:
        raise DataError(f"no episodes to write to Minari dataset '{dataset_id}'")


def _flush(storage: Any, batch: list[Episode], written: int, spaces: tuple[Any, Any], target: Path) -> int:
    """Append a batch of episodes and their metadata; the number of episodes written so far."""
    from minari.data_collector import EpisodeBuffer

    check_room(Path(storage.data_path), sum(episode_bytes(ep) for ep in batch), target)
    obs_space, act_space = spaces
    storage.update_episodes(
        EpisodeBuffer(
            observations=nest_like(obs_space, ep.obs),
            actions=actions_like(np.asarray(ep.actions), act_space),
            rewards=np.asarray(ep.rewards, dtype=np.float64),
            terminations=np.asarray(ep.terminated, dtype=bool),
            truncations=np.asarray(ep.truncated, dtype=bool),
            infos={GOALS_INFO: dict(ep.goals)} if ep.goals else None,
        )
        for ep in batch
    )
    metas = [
        {
            f"{META_PREFIX}time_start": int(ep.time_start),
            f"{META_PREFIX}env_name": ep.env_name,
            f"{META_PREFIX}source": ep.source,
            f"{META_PREFIX}meta": json.dumps(ep.meta),
        }
        for ep in batch
    ]
    storage.update_episode_metadata(metas, episode_indices=range(written, written + len(batch)))
    return written + len(batch)


def episode_bytes(episode: Episode) -> int:
    """Room an episode takes in a Minari HDF5 file (an upper bound): its arrays as written (rewards float64), its
    metadata, and HDF5_ARRAY_BYTES per array and for its attributes."""
    arrays = [*episode.obs.values(), *episode.goals.values(), episode.actions, episode.terminated, episode.truncated]
    data = sum(np.asarray(a).nbytes for a in arrays) + 8 * episode.length + len(json.dumps(episode.meta))
    return int(data + HDF5_ARRAY_BYTES * (len(arrays) + 2))


def check_room(data_dir: Path, needed: int, target: Path) -> None:
    """OutOfSpaceError naming dataset `target` when `needed` more bytes do not fit in `data_dir`'s HDF5 file: less
    free disk space, or the file would pass the file-size limit (RLIMIT_FSIZE)."""
    size = sum(f.stat().st_size for f in data_dir.glob("*.hdf5"))
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and size + needed > limit:
        number = errno.EFBIG
    elif needed > shutil.disk_usage(data_dir).free:
        number = errno.ENOSPC
    else:
        return
    cause = OSError(number, os.strerror(number), str(data_dir))
    raise out_of_space_error(target, cause, kept=f"nothing was written (it needs about {needed:,} bytes more)")


def _ensure_namespace(dataset_id: str) -> None:
    """Register the dataset id's namespace in the real Minari root (as minari itself does on create)."""
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.namespace import create_namespace, list_local_namespaces

    namespace = parse_dataset_id(dataset_id)[0]
    if namespace is None or namespace in list_local_namespaces():
        return
    with contextlib.suppress(ValueError):  # another writer registered it meanwhile
        create_namespace(namespace)


def dataset_fingerprint(path: str | Path) -> str:
    """`hash_tree` of a dataset folder (every file's relative name and contents), truncated to 16 hex digits."""
    root = Path(path)
    if not root.exists():
        raise DataError(f"cannot fingerprint '{root}': it does not exist")
    return hash_tree(root)[:16]
