"""The top-level pipeline config: name, store, seed and the named stages."""

from __future__ import annotations

import re
from dataclasses import field
from typing import Literal

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError, describe
from amago_pipe.config.stages import StageConfig

FORMAT_VERSION = 1
NAME_MAX = 64
"""Longest pipeline or stage name: each names a folder, and suffixes are added to some of them."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def name_problem(name: object, what: str) -> str:
    """Why `name` cannot be a pipeline or stage name (each names a folder); '' when it can. `what`: "stage name"."""
    rule = f"use 1 to {NAME_MAX} ASCII letters (a-z, A-Z), digits, '-' or '_', starting with a letter or '_'"
    if not isinstance(name, str):
        return f"{what} {describe(name)} is not a string; {rule}"
    if len(name) > NAME_MAX:
        return f"{what} '{name[:16]}...' is {len(name)} characters long; {rule}"
    if not _NAME.fullmatch(name):
        return f"{what} '{name}' is not allowed; {rule}"
    return ""


@config
class PartitionSettings:
    """How one store partition behaves; applied before a stage writes into it."""

    kind: Literal["protected", "fifo", "plain"] | None = None
    """`protected` (never evicted), `fifo` (bounded, oldest first) or `plain`; null: by name (`fifo` for fifo)."""
    capacity_timesteps: int | None = None
    """fifo only: the most timesteps kept; the oldest whole episodes are evicted as new data is sealed."""

    def __post_init__(self) -> None:
        if self.capacity_timesteps is not None and self.capacity_timesteps < 1:
            raise FieldError("capacity_timesteps", f"must be at least 1, got {self.capacity_timesteps}")
        if self.capacity_timesteps is not None and self.kind not in (None, "fifo"):
            raise FieldError("capacity_timesteps", f"applies to fifo partitions only, not kind '{self.kind}'")


@config
class StoreCacheConfig:
    """How a training process keeps the store's segments for sampling; results are the same whatever the setting."""

    ram_gib: float = 1.0
    """GiB of RAM for decompressed segments (0: none held in RAM)."""
    disk_tier: bool = True
    """Keep what does not fit `ram_gib` in uncompressed local files (a mapped spill arena and, for images, one file
    per segment) instead of reading zarr (~1 ms a read); false: read zarr."""
    dir: str | None = None
    """Where those files live; null: `<store>/.cache` for a local store, a user cache folder for a remote one."""

    def __post_init__(self) -> None:
        if not self.ram_gib >= 0:
            raise FieldError("ram_gib", f"must be a number of GiB >= 0, got {self.ram_gib}")

    @property
    def ram_bytes(self) -> int:
        return int(self.ram_gib * 2**30)


@config
class StoreConfig:
    """The shared trajectory store and the settings of its partitions."""

    path: str
    """Path or URL of the store (any URL zarr and fsspec understand)."""
    partitions: dict[str, PartitionSettings] = field(default_factory=dict)
    """Per-partition settings, e.g. `{fifo: {capacity_timesteps: 200000}}`."""
    cache: StoreCacheConfig = field(default_factory=StoreCacheConfig)
    """How training keeps segments for sampling, e.g. `{ram_gib: 8, disk_tier: true}`."""

    def __post_init__(self) -> None:
        protected = self.partitions.get("protected")
        if protected is not None and protected.capacity_timesteps is not None:
            raise FieldError(
                "partitions.protected.capacity_timesteps",
                "the protected partition is never evicted, so it takes no capacity; bound a fifo partition instead "
                "(`partitions: {fifo: {capacity_timesteps: N}}`) and write the data that may be dropped there",
            )
        if protected is not None and protected.kind not in (None, "protected"):
            raise FieldError(
                "partitions.protected.kind",
                f"the partition named protected is always of kind protected (never evicted), not '{protected.kind}'; "
                "give a partition of another name that kind",
            )


@config
class PipelineConfig:
    """A whole experiment: stages run in dependency order inside one run directory."""

    version: int = FORMAT_VERSION
    """Pipeline file format version (currently 1)."""
    name: str
    """Name of the experiment; the run directory defaults to `runs/<name>`."""
    store: str | StoreConfig | None = None
    """Path or URL of the trajectory store shared by the stages (may be shared between pipelines), or `{path, partitions: {fifo: {capacity_timesteps: N}}}`."""
    seed: int = 0
    """Base random seed; each stage derives its own from it."""
    description: str = ""
    """Free text describing the experiment."""
    stages: dict[str, StageConfig]
    """Named stages, run in dependency order (see each stage's `needs`)."""

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FieldError(
                "version", f"version {self.version} is not supported by this amago-pipe (supported: {FORMAT_VERSION})"
            )
        problem = name_problem(self.name, "pipeline name")
        if problem:
            raise FieldError("name", f"{problem} (it names the run directory)")

    @property
    def store_path(self) -> str | None:
        """The store's path or URL (either form of `store:`)."""
        return self.store.path if isinstance(self.store, StoreConfig) else self.store

    @property
    def partition_settings(self) -> dict[str, PartitionSettings]:
        """Settings of the partitions named under `store: {partitions: ...}`."""
        return dict(self.store.partitions) if isinstance(self.store, StoreConfig) else {}

    @property
    def store_cache(self) -> StoreCacheConfig:
        """The `store: {cache: ...}` settings (the defaults for `store: PATH`)."""
        return self.store.cache if isinstance(self.store, StoreConfig) else StoreCacheConfig()
