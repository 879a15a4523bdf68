"""The Converter contract (open a source, stream its episodes) and the checks every converter shares.

A converter reads one source format and yields store `Episode`s; it never writes the store itself
(`converters.run` does). numpy only at module level; no torch, no click.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.spec import DataSpec

if TYPE_CHECKING:
    from amago_pipe.config.convert import ConvertStageConfig, SourceConfig
    from amago_pipe.store import Episode

    from .report import ConversionReport


@dataclass
class SourceInfo:
    """What a converter learns when it opens its source, before any episode is read."""

    name: str
    """Short description, e.g. `minari:D4RL/pen/human-v2` or `d4rl:/data/hopper.hdf5`."""
    spec: DataSpec
    fingerprint: str
    """Content fingerprint of the source together with the options that change what is written."""
    total_episodes: int | None = None
    """Episodes in the whole source, when known up front."""
    total_timesteps: int | None = None
    """Timesteps (transitions) in the whole source, when known up front; the progress bar's total."""
    env_name: str = ""
    env_spec: Any = None
    """The recorded environment spec (JSON-able), when the source has one; the env is never required."""
    metadata: dict[str, Any] = field(default_factory=dict)


class Converter(ABC):
    """Reads one source format; `open()` then `episodes(report)`, recording every adjustment in the report.

    `config` is the source's own typed config; `job` the convert stage's settings (episodes, filters, env name).
    A plugin sets `Config` to its SourceConfig subclass and is named by `type: package.module:Class`.
    """

    name: ClassVar[str] = ""
    Config: ClassVar[type[SourceConfig]]

    def __init__(self, config: SourceConfig, job: ConvertStageConfig):
        self.config = config
        self.job = job
        self.selection = EpisodeSelection(job.episodes)

    def options(self, **source_options: Any) -> dict[str, Any]:
        """What changes the written data besides the source's bytes (part of its fingerprint)."""
        return {"episodes": self.job.episodes, "filters": self.job.filters, "env": self.job.env_name, **source_options}

    @abstractmethod
    def open(self) -> SourceInfo:
        """Check the source and describe it (spec, fingerprint, sizes); cheap, reads no episode data."""

    @abstractmethod
    def episodes(self, report: ConversionReport) -> Iterator[Episode]:
        """Yield the selected episodes in source order; record dropped/changed timesteps with `report.adjust`."""

    def close(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release open files (called once the conversion ends, even on error)."""


class EpisodeSelection:
    """The `episodes:` option: all, the first N, or `[start, stop)` by source episode index."""

    def __init__(self, episodes: int | list[int] | tuple[int, ...] | None):
        if episodes is None:
            self.start, self.stop = 0, None
        elif isinstance(episodes, int):
            self.start, self.stop = 0, episodes
        else:
            self.start, self.stop = int(episodes[0]), int(episodes[1])

    def __contains__(self, index: int) -> bool:
        return index >= self.start and (self.stop is None or index < self.stop)

    def bounds(self, total: int) -> tuple[int, int]:
        """`(start, stop)` clipped to a source of `total` episodes."""
        stop = total if self.stop is None else min(self.stop, total)
        return min(self.start, total), stop

    def past_end(self, index: int) -> bool:
        return self.stop is not None and index >= self.stop

    def describe(self) -> str:
        return "all" if self.stop is None and self.start == 0 else f"[{self.start}, {self.stop})"


class EpisodeFilter:
    """The `filters:` option applied to a converted episode (length, return, ending, metadata equality)."""

    def __init__(self, filters: dict[str, Any]):
        self.filters = dict(filters)

    def __bool__(self) -> bool:
        return bool(self.filters)

    def accepts(self, episode: Episode) -> bool:
        return all(self._check(key, want, episode) for key, want in self.filters.items())

    def _check(self, key: str, want: Any, episode: Episode) -> bool:
        if key == "min_length":
            return bool(episode.length >= want)
        if key == "max_length":
            return bool(episode.length <= want)
        if key in ("min_return", "max_return"):
            ret = float(np.sum(episode.rewards, dtype=np.float64))
            return bool(ret >= want if key == "min_return" else ret <= want)
        if key == "ends":
            allowed = want if isinstance(want, list) else [want]
            return ending(episode) in allowed
        name = key.removeprefix("metadata.")
        value = _lookup(episode.meta, name)
        if isinstance(want, list):
            return any(_equal(value, w) for w in want)
        return _equal(value, want)


def ending(episode: Episode) -> str:
    """`terminated`, `truncated` or `unfinished` (the last step's flags; termination wins)."""
    if episode.length and bool(episode.terminated[-1]):
        return "terminated"
    if episode.length and bool(episode.truncated[-1]):
        return "truncated"
    return "unfinished"


def _lookup(meta: dict[str, Any], dotted: str) -> Any:
    node: Any = meta
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _equal(value: Any, want: Any) -> bool:
    if isinstance(value, np.generic):
        value = value.item()
    return bool(value == want)


def check_finite(episode: Episode, *, where: str, allow: bool, report: ConversionReport, index: int) -> None:
    """Raise DataError on NaN/inf (naming the episode, key and step) unless allowed; count them either way."""
    arrays: dict[str, np.ndarray] = {f"observations['{k}']": v for k, v in episode.obs.items()}
    arrays.update({f"goals['{k}']": v for k, v in episode.goals.items()})
    arrays["actions"], arrays["rewards"] = episode.actions, episode.rewards
    for name, arr in arrays.items():
        if arr.dtype.kind not in "fc":
            continue
        finite = np.isfinite(arr)
        if finite.all():
            continue
        bad = int(finite.size - np.count_nonzero(finite))
        step = int(np.argwhere(~finite)[0][0])
        if not allow:
            raise DataError(
                f"{where}: episode {index}: {name} has {bad} non-finite value(s) (NaN/inf), the first at step {step}; "
                f"expected finite numbers. Fix the data, skip the episode (`episodes:`/`filters:`), "
                f"or set `allow_nonfinite: true` (CLI: --allow-nonfinite) to keep them"
            )
        report.adjust(
            f"nonfinite_kept:{name}",
            f"{name}: non-finite values kept because allow_nonfinite is set",
            episode=index,
            timesteps=bad,
        )


def check_lengths(arrays: dict[str, np.ndarray], *, steps: int, where: str) -> None:
    """DataError naming each array whose length is not `steps` (or `steps + 1` for observations)."""
    problems = []
    for name, arr in arrays.items():
        want = steps + 1 if name.startswith(("observations", "obs")) else steps
        if len(arr) != want:
            problems.append(f"{name} has {len(arr)} rows, expected {want}")
    if problems:
        raise DataError(f"{where}: arrays of mismatched length: " + "; ".join(problems))


def as_flags(values: np.ndarray, *, what: str, where: str) -> np.ndarray:
    """A (T,) bool array from bool or 0/1 numbers; DataError naming the steps when other values appear."""
    arr = np.asarray(values)
    if arr.dtype == np.bool_:
        return arr.reshape(len(arr))
    flat = arr.reshape(len(arr)) if arr.size == len(arr) else arr
    if flat.ndim != 1:
        raise DataError(f"{where}: {what} has shape {arr.shape}, expected one flag per step")
    odd = ~np.isin(flat, (0, 1))
    if odd.any():
        steps = np.flatnonzero(odd)[:5].tolist()
        raise DataError(f"{where}: {what} holds values other than 0/1 at steps {steps}; expected boolean flags")
    return flat.astype(bool)


def to_float32(values: np.ndarray, *, what: str, report: ConversionReport, index: int) -> np.ndarray:
    """Cast to float32, recording an adjustment when that changes any value (e.g. float64 rounding)."""
    arr = np.asarray(values)
    if arr.dtype == np.float32:
        return arr
    out = arr.astype(np.float32)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 4:
        with np.errstate(invalid="ignore", over="ignore"):
            err = np.abs(out.astype(arr.dtype) - arr)
        worst = float(np.nanmax(err)) if err.size else 0.0
        if worst > 0:
            report.adjust(
                f"cast_float32:{what}",
                f"{what} stored as float32 (source {arr.dtype}); largest rounding change seen {worst:.3g}",
                episode=index,
                timesteps=len(arr),
            )
    elif arr.dtype.kind in "iub" and what != "rewards":
        report.adjust(f"cast_float32:{what}", f"{what} cast from {arr.dtype} to float32", episode=index)
    return out


def make_converter(job: ConvertStageConfig) -> Converter:
    """Instantiate the converter that `job.source` names."""
    from amago_pipe.errors import ConfigError

    cls = job.source.implementation()
    if not (isinstance(cls, type) and issubclass(cls, Converter)):
        raise ConfigError(
            f"source.type: '{job.source.type}' is not a converter; a plugin must subclass "
            "amago_pipe.converters.base.Converter and set `Config` to its SourceConfig subclass",
            path="source.type",
        )
    return cls(job.source, job)
