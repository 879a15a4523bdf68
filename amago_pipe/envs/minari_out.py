"""Write collected episodes as a new local Minari dataset (via `minari.create_dataset_from_buffers`) and hash it.

Uses minari's buffer API only (not DataCollector, which needs jax). numpy + gymnasium + minari; no torch.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from amago_pipe.errors import ConfigError, DataError
from amago_pipe.spec import DEFAULT_OBS_KEY, KEY_SEP
from amago_pipe.store import Episode

COLLECT_MARK = "amago-pipe collect"
"""`algorithm_name` written into datasets made here; only such datasets are ever replaced."""


def minari_dataset_path(dataset_id: str) -> Path:
    """Folder of a local Minari dataset (honours MINARI_DATASETS_PATH)."""
    from minari.storage.datasets_root_dir import get_dataset_path

    return Path(get_dataset_path(dataset_id))


def nest_like(space: gym.Space, flat: dict[str, np.ndarray], prefix: str = "") -> Any:
    """Inverse of `flatten_obs` following the space: Dict -> dict, Tuple -> tuple, leaves from `flat`."""
    if isinstance(space, gym.spaces.Dict):
        return {k: nest_like(sub, flat, f"{prefix}{k}{KEY_SEP}") for k, sub in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(nest_like(sub, flat, f"{prefix}{i}{KEY_SEP}") for i, sub in enumerate(space.spaces))
    return flat[prefix[: -len(KEY_SEP)] if prefix else DEFAULT_OBS_KEY]


def _existing_mark(path: Path) -> str | None:
    meta = path / "data" / "metadata.json"
    try:
        return str(json.loads(meta.read_text()).get("algorithm_name"))
    except (OSError, ValueError):
        return None


def prepare_dataset_dir(dataset_id: str, *, replace: bool, where: str) -> None:
    """Make room for a new dataset: remove an old one made by amago-pipe collect (if `replace`), else refuse."""
    path = minari_dataset_path(dataset_id)
    if not path.exists():
        return
    mark = _existing_mark(path)
    if replace and mark == COLLECT_MARK:
        shutil.rmtree(path)
        return
    why = (
        "it was not made by amago-pipe collect, so it is never replaced"
        if mark != COLLECT_MARK
        else "set `replace: true` (or --overwrite) to rewrite it"
    )
    raise ConfigError(
        f"{where}: a local Minari dataset '{dataset_id}' already exists at {path}; {why}. "
        "Pick another dataset_id (e.g. bump the version suffix) or delete that folder",
        path=where,
    )


def write_minari_dataset(
    dataset_id: str,
    episodes: list[Episode],
    *,
    observation_space: gym.Space,
    action_space: gym.Space,
    env_spec: Any = None,
    description: str = "",
) -> Path:
    """Create the local Minari dataset `dataset_id` from episodes (exact arrays: no JPEG encoding)."""
    from minari import create_dataset_from_buffers
    from minari.data_collector.episode_buffer import EpisodeBuffer

    if not episodes:
        raise DataError(f"no episodes to write to Minari dataset '{dataset_id}'")
    buffers = [
        EpisodeBuffer(
            id=i,
            observations=nest_like(observation_space, ep.obs),
            actions=_env_actions(ep.actions, action_space),
            rewards=ep.rewards.astype(np.float64),
            terminations=ep.terminated.astype(bool),
            truncations=ep.truncated.astype(bool),
        )
        for i, ep in enumerate(episodes)
    ]
    space_kwargs = {"observation_space": observation_space, "action_space": action_space}
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
            **space_kwargs,
        )
    return minari_dataset_path(dataset_id)


def _env_actions(actions: np.ndarray, space: gym.Space) -> np.ndarray:
    """Stored actions in the action space's own dtype and shape, one row per step."""
    dtype = getattr(space, "dtype", None) or actions.dtype
    return np.asarray(actions, dtype=dtype).reshape(len(actions), *(space.shape or ()))


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
