"""Config of the `convert` stage: which dataset to read, which episodes to keep, where to write them.

No torch, no click; the converters themselves live in `amago_pipe.converters` and are imported lazily.
"""

from __future__ import annotations

from dataclasses import field
from pathlib import Path
from typing import Any, ClassVar, Literal

from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError
from amago_pipe.config.envs import TextConfig
from amago_pipe.config.registries import CONVERTERS
from amago_pipe.config.stages import StageConfig
from amago_pipe.errors import did_you_mean

FILTER_KEYS = ("min_length", "max_length", "min_return", "max_return", "ends")
"""Filter names besides `metadata.<key>` (equality on a per-episode metadata value)."""
ENDINGS = ("terminated", "truncated", "unfinished")
"""Values of the `ends` filter."""


@config
class SourceConfig(Component):
    """Where a `convert` stage reads its episodes: one config class per source format (`type:`).

    A plugin is `type: package.module:MyConverter` where `MyConverter` subclasses
    `amago_pipe.converters.base.Converter` and sets `Config` to its own subclass of this class.
    """

    registry = CONVERTERS
    cli_arg: ClassVar[str] = "path"
    """Field filled by the positional argument of `amago-pipe convert <type> ARG`."""
    cli_positional: ClassVar[tuple[str, ...]] = ("path",)
    """Fields the positional argument may set (not offered as options)."""

    @classmethod
    def from_cli_arg(cls, arg: str) -> dict[str, Any]:
        """The source fields the CLI's positional argument sets."""
        return {cls.cli_arg: arg}

    def describe(self) -> str:
        """Short label for progress bars and logs."""
        return f"{self.type}:{getattr(self, self.cli_arg, '')}"


@config
class MinariSourceConfig(SourceConfig):
    """A Minari dataset: by id from the local Minari root, or a dataset folder."""

    impl: ClassVar[str] = "amago_pipe.converters.minari_source:MinariConverter"
    cli_arg: ClassVar[str] = "dataset"
    cli_positional: ClassVar[tuple[str, ...]] = ("dataset", "path")
    type: str = "minari"
    """Registered name or `package.module:Class` of a plugin."""
    dataset: str | None = None
    """Minari dataset id (e.g. `D4RL/pen/human-v2`), looked up in the local Minari root (`MINARI_DATASETS_PATH`)."""
    path: str | None = None
    """A Minari dataset folder (instead of `dataset`)."""
    download: bool = False
    """Download the dataset when it is not found locally (needs network access)."""
    info_keys: list[str] = field(default_factory=list)
    """Per-step episode infos kept as extra observation keys `infos/<key>`."""
    keep_episode_metadata: bool = False
    """Store each episode's attributes (seed, options, ...) in its metadata (slower to read)."""
    goals_from_obs: bool = False
    """Also copy the `achieved_goal`/`desired_goal` observation keys into the goal fields (for relabeling)."""
    obs_keys: list[str] = field(default_factory=list)
    """Keep only these keys of a Dict observation (e.g. `[image, direction, mission]`); empty keeps them all."""
    text: TextConfig | None = None
    """Read the dataset's string observations (a `Text` space, MiniGrid's `mission`) as word ids, e.g.
    `{vocabulary: minigrid, max_tokens: 32}` (the same as the env's `text:`, so online data and the policy agree);
    unknown words and cut texts are counted in the report. Null: a text observation is refused."""

    @classmethod
    def from_cli_arg(cls, arg: str) -> dict[str, Any]:
        """A folder that exists is a dataset folder (`path`); anything else a dataset id."""
        return {"path": arg} if Path(arg).is_dir() else {"dataset": arg}

    def describe(self) -> str:
        """Short label for progress bars and logs."""
        return f"minari:{self.dataset or self.path}"

    def __post_init__(self) -> None:
        if not (self.dataset or self.path):
            raise FieldError("dataset", "source 'minari' needs `dataset:` (a Minari id) or `path:` (a dataset folder)")
        if self.dataset and self.path:
            raise FieldError("path", "give either `dataset:` (a Minari id) or `path:` (a dataset folder), not both")


@config
class D4rlSourceConfig(SourceConfig):
    """One D4RL-layout HDF5 file (read with h5py; the d4rl package is not needed)."""

    impl: ClassVar[str] = "amago_pipe.converters.d4rl_hdf5:D4rlHdf5Converter"
    type: str = "d4rl"
    """Registered name or `package.module:Class` of a plugin."""
    path: str
    """The `.hdf5` file."""
    info_keys: list[str] = field(default_factory=list)
    """Per-step `infos/*` arrays kept as extra observation keys `infos/<key>`."""
    repeat_last_obs: bool = False
    """Files without next_observations: keep each timeout's last step with a repeated final observation."""
    split_on_discontinuity: bool = True
    """Files with next_observations: start a new episode where next_observations[t] != observations[t+1]."""


@config
class AmagoBufferSourceConfig(SourceConfig):
    """An AMAGO dataset folder: the `.npz` trajectories of its `buffer/` (`.traj` pickles are refused)."""

    impl: ClassVar[str] = "amago_pipe.converters.amago_buffer:AmagoBufferConverter"
    type: str = "amago-buffer"
    """Registered name or `package.module:Class` of a plugin."""
    path: str
    """The AMAGO dataset folder or its `buffer/` folder."""
    action_kind: Literal["auto", "discrete", "continuous", "multibinary"] = "auto"
    """AMAGO stores actions as float vectors: how to read them (auto: all one-hot rows means discrete)."""
    buffer_partitions: list[str] = field(default_factory=lambda: ["protected", "fifo"])
    """Sub-folders of `buffer/` to read (when the folder has them)."""


@config
class ConvertStageConfig(StageConfig):
    """Convert a dataset (Minari, D4RL HDF5, AMAGO buffer, or a plugin) into a store partition, with a report."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.convert:ConvertStage"

    source: SourceConfig
    """The dataset to read: `{type: minari, dataset: ...}`, `{type: d4rl, path: ...}`, `{type: amago-buffer, path: ...}` or a plugin `{type: package.module:Class, ...}`."""
    partition: str = "protected"
    """Store partition the episodes are written into (`protected` is never evicted)."""
    episodes: int | list[int] | None = None
    """Subset of source episodes: a count (the first N) or `[start, stop]` (stop excluded); null keeps all."""
    filters: dict[str, Any] = field(default_factory=dict)
    """Keep only episodes passing all of: min_length, max_length, min_return, max_return, ends, metadata.<key>."""
    allow_nonfinite: bool = False
    """Keep NaN/inf values instead of failing on them; they are counted in the report."""
    env_name: str | None = None
    """Environment name stored with every episode (default: taken from the source)."""
    force: bool = False
    """Convert again even if this source is already in the partition; the earlier copy is replaced."""

    @classmethod
    def old_form(cls, data: dict[str, Any]) -> str | None:
        """The fix for a pre-0.2 `source: d4rl` + `path:` stage (the source's fields were at stage level)."""
        source = data.get("source")
        if not isinstance(source, str):
            return None
        moved = {k: v for k, v in data.items() if k in _SOURCE_FIELDS}
        new = {"type": source, **moved}
        return (
            f"`source: {source}` with the source's options beside it is the old form; the source is now a "
            f"component with its own fields: `source: {{{', '.join(f'{k}: {v}' for k, v in new.items())}}}` "
            "(see README, 'Converting datasets')"
        )

    def __post_init__(self) -> None:
        if not self.partition:
            raise FieldError("partition", "partition must be a non-empty name (e.g. protected)")
        _check_episodes(self.episodes)
        _check_filters(self.filters)


_SOURCE_FIELDS = (
    "dataset", "path", "download", "info_keys", "keep_episode_metadata", "goals_from_obs", "repeat_last_obs",
    "split_on_discontinuity", "action_kind", "amago_partitions", "options",
)  # fmt: skip


def _check_episodes(episodes: int | list[int] | None) -> None:
    if episodes is None:
        return
    if isinstance(episodes, int):
        if episodes < 1:
            raise FieldError("episodes", f"a count of episodes must be >= 1, got {episodes}")
        return
    if len(episodes) != 2 or not (0 <= episodes[0] < episodes[1]):
        raise FieldError(
            "episodes", f"expected a count or [start, stop] with 0 <= start < stop (stop excluded), got {episodes}"
        )


def _check_filters(filters: dict[str, Any]) -> None:
    for key, value in filters.items():
        if key.startswith("metadata."):
            continue
        if key not in FILTER_KEYS:
            raise FieldError(
                f"filters.{key}",
                f"unknown filter '{key}' (known: {', '.join(FILTER_KEYS)}, metadata.<key>)"
                f"{did_you_mean(key, list(FILTER_KEYS))}",
            )
        if key == "ends":
            values = value if isinstance(value, list) else [value]
            bad = [v for v in values if v not in ENDINGS]
            if bad:
                raise FieldError(f"filters.{key}", f"expected one or a list of {', '.join(ENDINGS)}, got {bad}")
        elif isinstance(value, bool) or not isinstance(value, int | float):
            raise FieldError(f"filters.{key}", f"expected a number, got {value!r}")
