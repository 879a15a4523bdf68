"""Write collected episodes as a new local Minari dataset, all or nothing, one writer per dataset id; hash it.

The dataset is built in a hidden staging folder of the Minari root and renamed into place, so a killed collect
never leaves a half-written dataset behind; an flock per dataset id (released by the kernel when its holder
dies) lets concurrent collects of one id fail fast with a clear message. Uses minari's buffer API (not
DataCollector, which needs jax). numpy + gymnasium + minari; no torch.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.converters.to_minari import minari_root
from amago_pipe.errors import ConfigError, DataError, LockError
from amago_pipe.gym_spaces import actions_like
from amago_pipe.spec import nest_like
from amago_pipe.store import Episode

COLLECT_MARK = "amago-pipe collect"
"""`algorithm_name` written into datasets made here; only such datasets are ever replaced."""
WORK_DIR = ".amago-pipe-collect"
"""Hidden folder of the Minari root (Minari lists skip it) with the per-id locks and staging folders."""


def minari_dataset_path(dataset_id: str) -> Path:
    """Folder of a local Minari dataset (honours MINARI_DATASETS_PATH)."""
    from minari.storage.datasets_root_dir import get_dataset_path

    return Path(get_dataset_path(dataset_id))


def _work_path(kind: str, dataset_id: str) -> Path:
    """`<root>/.amago-pipe-collect/<kind>/<id with '/' as '~'>`: one lock, staging or old copy per dataset id."""
    return minari_dataset_path("") / WORK_DIR / kind / dataset_id.replace("/", "~")


def _existing_mark(path: Path) -> str | None:
    meta = path / "data" / "metadata.json"
    try:
        name = json.loads(meta.read_text()).get("algorithm_name")
    except (OSError, ValueError, AttributeError):
        return None
    return None if name is None else str(name)


def check_dataset_target(dataset_id: str, *, replace: bool, where: str) -> None:
    """Raise ConfigError unless `dataset_id` is free, or made by amago-pipe collect and `replace` is set."""
    path = minari_dataset_path(dataset_id)
    if not path.exists():
        return
    mark = _existing_mark(path)
    if replace and mark == COLLECT_MARK:
        return
    if mark == COLLECT_MARK:
        why = "set `replace: true` (or --overwrite) to rewrite it"
    elif mark is None:
        why = (
            "its data/metadata.json is missing, unreadable or names no algorithm (an interrupted write?), "
            "so it is never replaced"
        )
    else:
        why = "it was not made by amago-pipe collect, so it is never replaced"
    raise ConfigError(
        f"{where}: a local Minari dataset '{dataset_id}' already exists at {path}; {why}. "
        "Pick another dataset_id (e.g. bump the version suffix) or delete that folder",
        path=where,
    )


@contextlib.contextmanager
def dataset_lock(dataset_id: str, *, where: str) -> Iterator[None]:
    """Hold the dataset id's lock; LockError naming the holder when another process has it."""
    path = _work_path("locks", dataset_id).with_suffix(".lock")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            f.seek(0)
            holder = f.read().strip() or "?"
            raise LockError(
                f"{where}: Minari dataset '{dataset_id}' is being written by another amago-pipe collect "
                f"(pid {holder}); wait for it to finish, or pick another dataset_id"
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
    episodes: list[Episode],
    *,
    observation_space: gym.Space,
    action_space: gym.Space,
    env_spec: Any = None,
    description: str = "",
) -> Path:
    """Create (or replace) the local Minari dataset `dataset_id` from episodes (exact arrays: no JPEG).

    Call it inside `dataset_lock(dataset_id)`: the staging and old-copy folders are that id's own.
    """
    if not episodes:
        raise DataError(f"no episodes to write to Minari dataset '{dataset_id}'")
    staging, old = _work_path("staging", dataset_id), _work_path("old", dataset_id)
    target = minari_dataset_path(dataset_id)
    shutil.rmtree(staging, ignore_errors=True)  # a killed earlier write's leftovers
    shutil.rmtree(old, ignore_errors=True)
    moved = False
    try:
        with minari_root(staging):
            _create(dataset_id, episodes, observation_space, action_space, env_spec, description)
        _ensure_namespace(dataset_id)
        if target.exists():
            old.parent.mkdir(parents=True, exist_ok=True)
            os.replace(target, old)
            moved = True
        os.replace(staging / dataset_id, target)
    except BaseException:
        if moved and not target.exists():  # put the previous dataset back
            os.replace(old, target)
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(old, ignore_errors=True)
    return target


def _create(
    dataset_id: str,
    episodes: list[Episode],
    observation_space: gym.Space,
    action_space: gym.Space,
    env_spec: Any,
    description: str,
) -> None:
    from minari import create_dataset_from_buffers
    from minari.data_collector.episode_buffer import EpisodeBuffer

    buffers = [
        EpisodeBuffer(
            id=i,
            observations=nest_like(observation_space, ep.obs),
            actions=actions_like(ep.actions, action_space),
            rewards=ep.rewards.astype(np.float64),
            terminations=ep.terminated.astype(bool),
            truncations=ep.truncated.astype(bool),
        )
        for i, ep in enumerate(episodes)
    ]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=UserWarning, module="minari")  # missing optional metadata
        create_dataset_from_buffers(
            dataset_id,
            buffers,
            env=env_spec,
            eval_env=env_spec,
            algorithm_name=COLLECT_MARK,
            author="amago-pipe",
            description=description or f"collected with {COLLECT_MARK}",
            jpeg_encoding=False,
            observation_space=observation_space,
            action_space=action_space,
        )


def _ensure_namespace(dataset_id: str) -> None:
    """Register the dataset id's namespace in the real Minari root (as minari itself does on create)."""
    from minari.dataset.minari_dataset import parse_dataset_id
    from minari.namespace import create_namespace, list_local_namespaces

    namespace = parse_dataset_id(dataset_id)[0]
    if namespace is None or namespace in list_local_namespaces():
        return
    with contextlib.suppress(ValueError):  # another collect registered it meanwhile
        create_namespace(namespace)


def dataset_fingerprint(path: str | Path) -> str:
    """sha256 over every file's relative path and contents under a dataset folder (order-independent)."""
    root = Path(path)
    if not root.exists():
        raise DataError(f"cannot fingerprint '{root}': it does not exist")
    digest = hashlib.sha256()
    for file in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(file.relative_to(root)).encode())
        with file.open("rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]
