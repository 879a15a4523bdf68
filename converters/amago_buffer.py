"""AMAGO `buffer/` folders → store episodes: `.npz` trajectory files loaded without pickle; `.traj` refused.

AMAGO's npz layout (FrozenTraj.to_dict): `_OBS_KEY_<k>` (T+1, ...), `actions` (T, A) float (one-hot when
discrete), `rews` (T, 1), `dones` (T, 1) terminals only, `time_idxs` (T+1, 1), `rl2s` (T+1, 1+A). numpy only.
"""

from __future__ import annotations

import re
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.config.convert import AmagoBufferSourceConfig
from amago_pipe.errors import DataError
from amago_pipe.hashing import hash_paths
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec

from .base import Converter, SourceInfo, as_flags, check_lengths, to_float32

if TYPE_CHECKING:
    from amago_pipe.store import Episode

    from .report import ConversionReport

OBS_PREFIX = "_OBS_KEY_"
KNOWN_KEYS = ("actions", "rews", "dones", "time_idxs", "rl2s")
_TIME_IN_NAME = re.compile(r"_(\d+(?:\.\d+)?)$")


def _load(path: Path) -> dict[str, np.ndarray]:
    """All arrays of one npz file, never unpickling; DataError naming the file when it is unreadable."""
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except ValueError as e:
        raise DataError(
            f"{path}: holds pickled (object) arrays, which are refused because unpickling runs code ({e}); "
            f"save the trajectories as plain-array .npz files"
        ) from e
    except (OSError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(
            f"{path}: not a readable .npz file ({type(e).__name__}: {e}); the file is truncated or corrupt"
        ) from e


def _sort_key(path: Path) -> tuple[float, str]:
    match = _TIME_IN_NAME.search(path.stem)
    return (float(match.group(1)) if match else float("inf"), path.name)


def _env_from_name(path: Path) -> str:
    """AMAGO names files `{env}_{random id}_{unix time}`."""
    parts = path.stem.split("_")
    return parts[0] if len(parts) >= 3 else path.stem


class AmagoBufferConverter(Converter):
    """Reads the `.npz` trajectories of an AMAGO buffer (protected/ and fifo/ sub-folders, or a flat folder)."""

    name = "amago-buffer"
    Config = AmagoBufferSourceConfig
    config: AmagoBufferSourceConfig

    def open(self) -> SourceInfo:
        cfg = self.config
        self.root = Path(cfg.path).expanduser().resolve()
        if not self.root.is_dir():
            raise DataError(
                f"path '{self.root}': no such folder; expected an AMAGO dataset folder or its buffer/ folder"
            )
        self.files = self._find_files()
        first = _load(self.files[0][1])
        self.action = self._action_spec(first, self.files[0][1])
        obs = {k.removeprefix(OBS_PREFIX): v for k, v in first.items() if k.startswith(OBS_PREFIX)}
        if not obs:
            raise DataError(
                f"{self.files[0][1]}: no observation arrays (keys starting with '{OBS_PREFIX}'; found "
                f"{sorted(first)}); expected a trajectory saved by AMAGO with save_trajs_as='npz'"
            )
        spec = DataSpec(
            observations={k: ArraySpec(tuple(int(s) for s in v.shape[1:]), v.dtype.name) for k, v in obs.items()},
            action=self.action,
        )
        options = self.options(action_kind=cfg.action_kind, partitions=cfg.buffer_partitions)
        return SourceInfo(
            name=f"amago-buffer:{self.root}",
            spec=spec,
            fingerprint=hash_paths(self.root, [p for _, p in self.files], sampled=True, extra=options)[:32],
            total_episodes=len(self.files),
            env_name=self.job.env_name or _env_from_name(self.files[0][1]),
            metadata={"files_per_folder": describe_files(self.files)},
        )

    def _find_files(self) -> list[tuple[str, Path]]:
        base = self.root / "buffer" if (self.root / "buffer").is_dir() else self.root
        subs = [s for s in self.config.buffer_partitions if (base / s).is_dir()]
        folders = [(s, base / s) for s in subs] if subs else [("", base)]
        files: list[tuple[str, Path]] = []
        pickles: list[Path] = []
        for label, folder in folders:
            files.extend((label, p) for p in sorted(folder.glob("*.npz"), key=_sort_key))
            pickles.extend(sorted(folder.glob("*.traj")))
        if pickles:
            raise DataError(
                f"{base}: {len(pickles)} .traj file(s) (e.g. {pickles[0].name}) are pickles, and loading a pickle runs "
                f"arbitrary code, so they are refused; re-save them from AMAGO as .npz (save_trajs_as='npz') "
                f"or move them out of the folder"
            )
        if not files:
            looked = ", ".join(str(f) for _, f in folders)
            raise DataError(
                f"{looked}: no .npz trajectory files found; expected AMAGO's buffer/{{protected,fifo}}/*.npz"
            )
        return files

    def _action_spec(self, first: dict[str, np.ndarray], path: Path) -> ActionSpec:
        if "actions" not in first or np.ndim(first["actions"]) != 2:
            raise DataError(f"{path}: 'actions' must be a (T, A) array (found keys {sorted(first)})")
        width = int(first["actions"].shape[1])
        kind: str = self.config.action_kind
        if kind == "auto":
            kind = _guess_kind(first["actions"])
            self.guessed = f"action kind '{kind}' inferred from {path.name} (set action_kind to override)"
        if kind == "discrete":
            return ActionSpec("discrete", (), n=width)
        if kind == "multibinary":
            return ActionSpec("multibinary", (width,), n=width)
        return ActionSpec("continuous", (width,), low=(-1.0,) * width, high=(1.0,) * width)

    # ---- episodes --------------------------------------------------------------------------------------------
    def episodes(self, report: ConversionReport) -> Iterator[Episode]:
        if hasattr(self, "guessed"):
            report.adjust("action_kind_inferred", self.guessed, count_episode=False)
        if self.action.kind == "continuous":
            report.adjust(
                "action_bounds_assumed",
                "AMAGO rescales continuous actions to [-1, 1]: bounds set to [-1, 1]",
                count_episode=False,
            )
        report.source_episodes, report.source_timesteps = len(self.files), 0
        for index, (label, path) in enumerate(self.files):
            if index not in self.selection:
                steps = int(_load(path)["rews"].shape[0])
                report.source_timesteps += steps
                report.unselected_episodes += 1
                report.unselected_timesteps += steps
                continue
            episode = self._episode(index, label, path, report)
            report.source_timesteps += episode.length
            yield episode

    def _episode(self, index: int, label: str, path: Path, report: ConversionReport) -> Episode:
        from amago_pipe.store import Episode

        data = _load(path)
        missing = [k for k in ("actions", "rews", "dones") if k not in data]
        if missing:
            raise DataError(f"{path}: missing {', '.join(missing)} (found {sorted(data)}); not an AMAGO npz trajectory")
        steps = int(np.shape(data["rews"])[0])
        obs = {k.removeprefix(OBS_PREFIX): v for k, v in data.items() if k.startswith(OBS_PREFIX)}
        arrays = {f"observations['{k}']": v for k, v in obs.items()}
        arrays.update(actions=data["actions"], rews=data["rews"], dones=data["dones"])
        check_lengths(arrays, steps=steps, where=str(path))
        ignored = sorted(k for k in data if not k.startswith(OBS_PREFIX) and k not in KNOWN_KEYS)
        if ignored:
            report.adjust(
                f"ignored_keys:{','.join(ignored)}",
                f"arrays {ignored} ignored (older AMAGO formats "
                f"store goals/extra inputs there; they are not part of the store's data model)",
                episode=index,
            )
        time_start = self._time_start(data, steps, index, report)
        terminated = as_flags(np.asarray(data["dones"]).reshape(steps), what="dones", where=str(path))
        if time_start > 0:
            report.adjust(
                "piece_of_longer_episode",
                "trajectory starts at time index > 0 (AMAGO save_every piece): its time_start was kept",
                episode=index,
            )
        if steps and not terminated[-1]:
            report.adjust(
                "ends_without_terminal",
                "ends without a terminal; AMAGO does not save truncation, so "
                "time limits and save_every pieces both look like this: kept as unfinished",
                episode=index,
            )
        return Episode(
            obs=obs,
            actions=self._actions(np.asarray(data["actions"]), path, index, report),
            rewards=to_float32(np.asarray(data["rews"]).reshape(steps), what="rewards", report=report, index=index),
            terminated=terminated,
            truncated=np.zeros(steps, dtype=bool),
            env_name=self.job.env_name or _env_from_name(path),
            source=f"amago-buffer:{label or self.root.name}",
            time_start=time_start,
            meta={"source_index": index, "file": path.name, "buffer": label},
        )

    def _time_start(self, data: dict[str, np.ndarray], steps: int, index: int, report: ConversionReport) -> int:
        """time_idxs[0]; the store keeps only the start, so gaps in time_idxs are reported."""
        if "time_idxs" not in data or not np.size(data["time_idxs"]):
            return 0
        times = np.ravel(data["time_idxs"]).astype(np.int64)
        start = int(times[0])
        if len(times) != steps + 1 or not np.array_equal(times, start + np.arange(len(times))):
            report.adjust(
                "time_idxs_not_consecutive",
                "time_idxs are not consecutive: only the first one is kept "
                "(the store's time index counts up from time_start)",
                episode=index,
            )
        return start

    def _actions(self, actions: np.ndarray, path: Path, index: int, report: ConversionReport) -> np.ndarray:
        kind = self.action.kind
        width = self.action.n if kind == "discrete" else self.action.shape[0]
        if actions.shape[1:] != (width,):
            raise DataError(f"{path}: actions have width {actions.shape[1:]}, expected ({width},) like the first file")
        if kind == "continuous":
            return to_float32(actions, what="actions", report=report, index=index)
        binary = np.isin(actions, (0, 1)).all()
        if kind == "discrete" and not (binary and (actions.sum(axis=1) == 1).all()):
            raise DataError(
                f"{path}: actions are not one-hot rows, but the actions are read as discrete; set action_kind "
                f"(continuous or multibinary) to match the environment"
            )
        if kind == "multibinary" and not binary:
            raise DataError(f"{path}: actions hold values other than 0/1 but are read as multibinary; set action_kind")
        if kind == "discrete":
            ids: np.ndarray = np.argmax(actions, axis=1).astype(np.int64)
            return ids
        return np.asarray(actions, dtype=np.int64)


def _guess_kind(actions: np.ndarray) -> str:
    if len(actions) and np.isin(actions, (0, 1)).all():
        return "discrete" if (actions.sum(axis=1) == 1).all() else "multibinary"
    return "continuous"


def describe_files(files: list[tuple[str, Path]]) -> dict[str, Any]:
    """Counts of trajectory files per buffer sub-folder (for the report's metadata)."""
    out: dict[str, Any] = {}
    for label, _ in files:
        out[label or "."] = out.get(label or ".", 0) + 1
    return out
