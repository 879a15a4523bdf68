"""Config of the `convert` stage: which dataset to read, which episodes to keep, where to write them.

No torch, no click; the converters themselves live in `amago_pipe.converters` and are imported lazily.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any, ClassVar, Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.registries import CONVERTERS
from amago_pipe.config.stages import StageConfig
from amago_pipe.errors import did_you_mean

FILTER_KEYS = ("min_length", "max_length", "min_return", "max_return", "ends")
"""Filter names besides `metadata.<key>` (equality on a per-episode metadata value)."""
ENDINGS = ("terminated", "truncated", "unfinished")
"""Values of the `ends` filter."""
SOURCES_NEEDING_PATH = ("d4rl", "amago-buffer")


@config
class ConvertStageConfig(StageConfig):
    """Convert a dataset (Minari, D4RL HDF5, AMAGO buffer, or a plugin) into a store partition, with a report."""

    impl: ClassVar[str] = "amago_pipe.pipeline.stages.convert:ConvertStage"

    source: str
    """Where the data comes from: `minari`, `d4rl`, `amago-buffer`, or a `package.module:Class` converter plugin."""
    dataset: str | None = None
    """Minari dataset id (e.g. `D4RL/pen/human-v2`), looked up in the local Minari root (`MINARI_DATASETS_PATH`)."""
    path: str | None = None
    """File or folder to read: a D4RL `.hdf5` file, an AMAGO `buffer/` folder, or a Minari dataset folder."""
    partition: str = "protected"
    """Store partition the episodes are written into (`protected` is never evicted)."""
    episodes: int | list[int] | None = None
    """Subset of source episodes: a count (the first N) or `[start, stop]` (stop excluded); null keeps all."""
    filters: dict[str, Any] = field(default_factory=dict)
    """Keep only episodes passing all of: min_length, max_length, min_return, max_return, ends, metadata.<key>."""
    download: bool = False
    """Download a Minari dataset that is not found locally (needs network access)."""
    allow_nonfinite: bool = False
    """Keep NaN/inf values instead of failing on them; they are counted in the report."""
    info_keys: list[str] = field(default_factory=list)
    """Per-step info arrays kept as extra observation keys `infos/<key>` (D4RL `infos/*`, Minari episode infos)."""
    keep_episode_metadata: bool = False
    """Minari: store each episode's attributes (seed, options, ...) in its metadata (slower to read)."""
    goals_from_obs: bool = False
    """Minari: also copy the `achieved_goal`/`desired_goal` observation keys into the goal fields (for relabeling)."""
    repeat_last_obs: bool = False
    """D4RL files without next_observations: keep each timeout's last step with a repeated final observation."""
    split_on_discontinuity: bool = True
    """D4RL files with next_observations: start a new episode where next_observations[t] != observations[t+1]."""
    action_kind: Literal["auto", "discrete", "continuous", "multibinary"] = "auto"
    """AMAGO buffers store actions as float vectors: how to read them (auto: all one-hot rows means discrete)."""
    amago_partitions: list[str] = field(default_factory=lambda: ["protected", "fifo"])
    """AMAGO buffers: which sub-folders of `buffer/` to read (when the folder has them)."""
    env_name: str | None = None
    """Environment name stored with every episode (default: taken from the source)."""
    force: bool = False
    """Convert again even if this source is already in the partition; the earlier copy is replaced."""
    options: dict[str, Any] = field(default_factory=dict)
    """Extra options for a `package.module:Class` converter plugin."""

    def __post_init__(self) -> None:
        if ":" not in self.source and self.source not in CONVERTERS:
            known = ", ".join(CONVERTERS.names())
            raise FieldError(
                "source",
                f"unknown converter '{self.source}' (known: {known}, or a 'package.module:Class' plugin)"
                f"{did_you_mean(self.source, CONVERTERS.names())}",
            )
        if self.source == "minari" and not (self.dataset or self.path):
            raise FieldError("dataset", "source 'minari' needs `dataset:` (a Minari id) or `path:` (a dataset folder)")
        if self.source in SOURCES_NEEDING_PATH and not self.path:
            what = "a D4RL .hdf5 file" if self.source == "d4rl" else "an AMAGO buffer/ folder"
            raise FieldError("path", f"source '{self.source}' needs `path:` ({what})")
        if not self.partition:
            raise FieldError("partition", "partition must be a non-empty name (e.g. protected)")
        _check_episodes(self.episodes)
        _check_filters(self.filters)


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
