"""Minari datasets → store episodes: every space kind Minari stores, N+1 observations, metadata kept.

The environment is never built (spaces come from the dataset's metadata). Imports minari lazily; no torch.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.config.base import to_dict
from amago_pipe.config.convert import MinariSourceConfig
from amago_pipe.errors import DataError
from amago_pipe.gym_spaces import spaces_json
from amago_pipe.hashing import files_under, hash_paths
from amago_pipe.spec import KEY_SEP, ArraySpec, DataSpec, action_spec, flatten_obs, flatten_space

from . import minari_local
from .base import Converter, SourceInfo, as_flags, check_lengths, to_float32
from .minari_text import kept_obs, kept_space, text_specs, token_space, tokenize
from .minari_writer import GOALS_INFO, META_PREFIX, METADATA_MARKS

if TYPE_CHECKING:
    from amago_pipe.store import Episode

    from .report import ConversionReport

INFO_PREFIX = "infos"
"""Observation keys made from `info_keys` are `infos/<key>`."""
GOAL_KEYS = ("achieved_goal", "desired_goal")
"""Observation keys copied into the goal fields with `goals_from_obs` (the gymnasium-robotics convention)."""
SPACE_HELP = (
    "supported: Box, Discrete, MultiBinary, MultiDiscrete, Text (with `text:`), and Dict/Tuple nestings of them; "
    "keep only some keys of a Dict with `obs_keys`"
)


class MinariConverter(Converter):
    """Reads a local (or downloaded) Minari dataset episode by episode."""

    name = "minari"
    Config = MinariSourceConfig
    config: MinariSourceConfig

    def open(self) -> SourceInfo:
        cfg = self.config
        ds = minari_local.load(cfg.dataset, cfg.path, download=cfg.download)
        self.dataset = ds
        self.where = f"minari dataset '{ds.id}'"
        total = int(ds.storage.total_episodes)
        if total == 0:
            raise DataError(f"{self.where}: the dataset has no episodes; expected at least one")
        start, stop = self.selection.bounds(total)
        if start >= stop:
            raise DataError(
                f"episodes: {self.selection.describe()} selects no episode of {self.where} ({total} episodes); "
                f"choose a range inside [0, {total})"
            )
        self.indices = np.asarray(ds.episode_indices)[start:stop]
        self.obs_space = kept_space(ds.observation_space, cfg, self.where)
        self.texts = text_specs(self.obs_space, cfg, self.where)
        first = next(self._read([int(self.indices[0])]))
        obs_specs = self._observation_specs(first)
        goal_specs = self._goal_specs(first)
        spec = DataSpec(
            observations=obs_specs,
            action=self._action_spec(),  # before `spaces`: names an unsupported action space with the fix
            goals=goal_specs,
            spaces=None if cfg.info_keys else spaces_json(token_space(self.obs_space, self.texts), ds.action_space),
        )
        self._spec = spec
        data_path = Path(ds.storage.data_path)
        options = self.options(
            info_keys=cfg.info_keys, goals=cfg.goals_from_obs, episode_metadata=cfg.keep_episode_metadata,
            **({"obs_keys": cfg.obs_keys} if cfg.obs_keys else {}),
            **({"text": to_dict(cfg.text)} if cfg.text else {}),
        )  # fmt: skip
        env_spec = _env_spec_json(ds)
        self.env_name = self.job.env_name or (env_spec or {}).get("id") or ds.id
        return SourceInfo(
            name=f"minari:{ds.id}",
            spec=spec,
            fingerprint=hash_paths(data_path, files_under(data_path), sampled=True, extra=options)[:32],
            total_episodes=total,
            total_timesteps=int(ds.storage.total_steps),
            env_name=self.env_name,
            env_spec=env_spec,
            metadata=_dataset_metadata(ds),
        )

    # ---- spec ------------------------------------------------------------------------------------------------
    def _observation_specs(self, first: Any) -> dict[str, ArraySpec]:
        try:
            specs = flatten_space(self.obs_space, text=self.texts)
        except DataError as e:
            raise DataError(f"{self.where}: {e}; {SPACE_HELP}") from e
        for key in self.config.info_keys:
            value = _info_value(first.infos or {}, key)
            if value is None:
                known = ", ".join(_info_names(first.infos or {})) or "none"
                raise DataError(
                    f"info_keys: '{key}' is not in the infos of {self.where} (episode {int(self.indices[0])} has: "
                    f"{known}); remove it from info_keys or pick one of those"
                )
            arr = np.asarray(value)
            specs[f"{INFO_PREFIX}{KEY_SEP}{key}"] = ArraySpec(tuple(int(s) for s in arr.shape[1:]), arr.dtype.name)
        return specs

    def _action_spec(self) -> Any:
        try:
            return action_spec(self.dataset.action_space)
        except DataError as e:
            raise DataError(f"{self.where}: {e}; {SPACE_HELP}") from e

    def _goal_specs(self, first: Any) -> dict[str, ArraySpec]:
        if self.config.goals_from_obs:
            space = self.dataset.observation_space
            subs = space.spaces if isinstance(getattr(space, "spaces", None), dict) else {}
            specs = {k: flatten_space(subs[k], f"{k}{KEY_SEP}").get(k) for k in GOAL_KEYS if k in subs}
            missing = [k for k in GOAL_KEYS if specs.get(k) is None]
            if missing:
                raise DataError(
                    f"goals_from_obs: {self.where} has no observation key(s) {missing} (it has: "
                    f"{', '.join(subs) or type(space).__name__}); expected a "
                    "goal-conditioned Dict space, or set goals_from_obs: false"
                )
            return {k: v for k, v in specs.items() if v is not None}
        group = (first.infos or {}).get(GOALS_INFO)
        if not isinstance(group, dict):
            return {}
        return {
            k: ArraySpec(tuple(int(s) for s in np.shape(v)[1:]), np.asarray(v).dtype.name) for k, v in group.items()
        }

    # ---- episodes --------------------------------------------------------------------------------------------
    def episodes(self, report: ConversionReport) -> Iterator[Episode]:
        ds = self.dataset
        report.source_episodes, report.source_timesteps = int(ds.storage.total_episodes), int(ds.storage.total_steps)
        if len(self.indices) < report.source_episodes:
            chosen = sum(int(m["total_steps"]) for m in ds.storage.get_episode_metadata(self.indices.tolist()))
            report.unselected_episodes = report.source_episodes - len(self.indices)
            report.unselected_timesteps = report.source_timesteps - chosen
        indices = [int(i) for i in self.indices]
        if self._needs_episode_metadata():
            metas: Iterator[dict[str, Any]] = (_jsonable(m) for m in ds.storage.get_episode_metadata(indices))
        else:  # reading per-episode attributes costs ~15% of the read time; only done when something uses them
            metas = iter(lambda: {}, None)
        for data, meta in zip(self._read(indices), metas):
            yield self._episode(data, meta, report)

    def _needs_episode_metadata(self) -> bool:
        """Per-episode attributes are read for `metadata.*` filters and for datasets written by amago-pipe."""
        uses = any(k.startswith("metadata.") for k in self.job.filters) or self.config.keep_episode_metadata
        return uses or self.dataset.storage.metadata.get("algorithm_name") in METADATA_MARKS

    def _read(self, indices: list[int]) -> Iterator[Any]:
        """Minari's episode iterator, with damaged files reported as DataError naming the episode."""
        episodes = self.dataset.iterate_episodes(indices)
        position = 0
        while True:
            try:
                data = next(episodes)
            except StopIteration:
                return
            except (OSError, KeyError, ValueError, RuntimeError) as e:
                where = indices[position] if position < len(indices) else "?"
                raise DataError(
                    f"{self.where}: reading episode {where} failed ({type(e).__name__}: {e}); the dataset files in "
                    f"{self.dataset.storage.data_path} are truncated or corrupt — download or copy them again"
                ) from e
            position += 1
            yield data

    def _episode(self, data: Any, meta: dict[str, Any], report: ConversionReport) -> Episode:
        from amago_pipe.store import Episode

        index = int(data.id)
        where = f"{self.where}, episode {index}"
        steps = len(data.rewards)
        obs = tokenize(flatten_obs(kept_obs(data.observations, self.config)), self.texts, report, index)
        infos = data.infos or {}
        for key in self.config.info_keys:
            obs[f"{INFO_PREFIX}{KEY_SEP}{key}"] = self._info_rows(infos, key, steps, index, report)
        goals = {k: np.asarray(v) for k, v in (infos.get(GOALS_INFO) or {}).items()}
        if self.config.goals_from_obs:
            goals = {k: np.asarray(data.observations[k]) for k in GOAL_KEYS}
        arrays = {f"observations['{k}']": v for k, v in obs.items()}
        arrays.update({f"observations (goal '{k}')": v for k, v in goals.items()})
        arrays.update(terminations=data.terminations, truncations=data.truncations, actions=data.actions)
        check_lengths(arrays, steps=steps, where=where)
        spec = self._spec
        obs = {k: _cast_obs(v, spec.observations[k], k, where, report, index) for k, v in obs.items()}
        restored = {k.removeprefix(META_PREFIX): v for k, v in meta.items() if k.startswith(META_PREFIX)}
        plain = {k: v for k, v in meta.items() if not k.startswith(META_PREFIX)}
        if isinstance(restored.get("meta"), str):  # written by minari_writer: the episode's own metadata
            episode_meta = json.loads(restored["meta"])
        else:
            episode_meta = {**plain, "source_index": index}
        return Episode(
            obs=obs,
            actions=self._actions(np.asarray(data.actions), where, report, index),
            rewards=to_float32(np.asarray(data.rewards), what="rewards", report=report, index=index),
            terminated=as_flags(data.terminations, what="terminations", where=where),
            truncated=as_flags(data.truncations, what="truncations", where=where),
            goals=goals,
            env_name=str(restored.get("env_name", self.env_name)),
            source=str(restored.get("source", f"minari:{self.dataset.id}")),
            time_start=int(restored.get("time_start", 0)),
            meta=episode_meta,
        )

    def _actions(self, actions: np.ndarray, where: str, report: ConversionReport, index: int) -> np.ndarray:
        spec = self._spec.action
        if spec.kind == "continuous":
            out = to_float32(actions, what="actions", report=report, index=index)
        else:
            out = actions.astype(np.int64, copy=False)
            if spec.kind == "discrete" and out.ndim == 2 and out.shape[1] == 1:
                out = out[:, 0]
                report.adjust(
                    "discrete_actions_squeezed", "discrete actions stored as (T, 1) squeezed to (T,)", episode=index
                )
        want = (len(actions), *spec.shape)
        if out.shape != want:
            raise DataError(f"{where}: actions have shape {out.shape}, expected {want} for the action space")
        return out

    def _info_rows(self, infos: dict[str, Any], key: str, steps: int, index: int, report: ConversionReport) -> Any:
        value = _info_value(infos, key)
        if value is None:
            raise DataError(
                f"{self.where}, episode {index}: info '{key}' is missing (present: "
                f"{', '.join(_info_names(infos)) or 'none'}); remove it from info_keys or fix the dataset"
            )
        arr = np.asarray(value)
        if len(arr) == steps and steps > 0:
            report.adjust(
                f"info_first_row_repeated:{key}",
                f"info '{key}' has one row per step (T), not per observation (T+1): its first row was repeated "
                f"for the reset observation",
                episode=index,
            )
            arr = np.concatenate([arr[:1], arr], axis=0)
        return arr

    def close(self) -> None:
        self.dataset = None


def _cast_obs(
    arr: np.ndarray, spec: ArraySpec, key: str, where: str, report: ConversionReport, index: int
) -> np.ndarray:
    arr = np.asarray(arr)
    if tuple(arr.shape[1:]) != spec.shape:
        raise DataError(
            f"{where}: observations['{key}'] has per-step shape {tuple(arr.shape[1:])}, expected {spec.shape} "
            f"(from the dataset's observation space); the dataset disagrees with its own metadata"
        )
    if arr.dtype.name == spec.dtype:
        return arr
    out = arr.astype(spec.dtype)
    changed = not np.array_equal(out.astype(arr.dtype), arr, equal_nan=arr.dtype.kind == "f")
    kind = f"cast:{key}"
    msg = f"observations['{key}'] cast from {arr.dtype} to {spec.dtype} (the space's dtype)"
    report.adjust(
        kind + (":lossy" if changed else ""),
        msg + ("; some values changed" if changed else ""),
        episode=index,
        timesteps=len(arr),
    )
    return out


def _info_value(infos: dict[str, Any], key: str) -> Any:
    node: Any = infos
    for part in key.split(KEY_SEP):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return None if isinstance(node, dict) else node


def _info_names(infos: dict[str, Any], prefix: str = "") -> list[str]:
    out = []
    for k, v in infos.items():
        if isinstance(v, dict):
            out.extend(_info_names(v, f"{prefix}{k}{KEY_SEP}"))
        else:
            out.append(f"{prefix}{k}")
    return out


def _env_spec_json(ds: Any) -> dict[str, Any] | None:
    spec = ds.env_spec
    if spec is None:
        return None
    try:
        parsed = json.loads(spec.to_json())
    except (TypeError, ValueError):
        return {"id": getattr(spec, "id", str(spec))}
    return parsed if isinstance(parsed, dict) else {"id": str(parsed)}


def _dataset_metadata(ds: Any) -> dict[str, Any]:
    raw = dict(ds.storage.metadata)
    keep = (
        "dataset_id",
        "minari_version",
        "algorithm_name",
        "author",
        "code_permalink",
        "description",
        "total_episodes",
        "total_steps",
        "data_format",
        "ref_min_score",
        "ref_max_score",
        "requirements",
    )
    out: dict[str, Any] = _jsonable({k: raw[k] for k in keep if k in raw})
    return out


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return obj
