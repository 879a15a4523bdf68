"""`TrajectoryStore`: partitions of sealed segments in one Zarr v3 hierarchy; append, evict, list, sample.

Writers never lock: each writes its own segment and seals it with a marker written last. The facade
composes a `StoreFiles` (files.py) and hands it to the parts below (reader, writers, sampler, eviction,
leftovers), which never call back into it. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.errors import DataError, StoreFormatError, did_you_mean
from amago_pipe.spec import DataSpec
from amago_pipe.store.backend import Backend, backend_for
from amago_pipe.store.episode import Episode
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import (
    DEFAULT_CODEC,
    PARTITIONS,
    ROOT_ATTR,
    PartitionKind,
    check_kind,
    check_partition_name,
    check_root_attrs,
    compressors,
    default_kind,
    partition_key,
    root_attrs,
    segment_fields,
)
from amago_pipe.store.info import PartitionInfo, SegmentInfo, SegmentMarker, WindowBatch
from amago_pipe.store.leftovers import reclaim_abandoned
from amago_pipe.store.reader import SegmentVanished, iter_segment_episodes, read_rewards
from amago_pipe.store.segments import SegmentWriter

if TYPE_CHECKING:
    from amago_pipe.store.sampler import WindowSampler

DEFAULT_CACHE_BYTES = 2**30


def _group_json(attributes: dict[str, Any]) -> bytes:
    return json.dumps({"attributes": attributes, "zarr_format": 3, "node_type": "group"}, indent=2).encode()


class TrajectoryStore:
    """A Zarr trajectory store. Make one with `create(url, spec)` or `open(url)`."""

    def __init__(
        self,
        backend: Backend,
        info: dict[str, Any],
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        refresh_seconds: float = 1.0,
        disk_tier: bool = True,
        cache_dir: str | Path | None = None,
    ):
        if not isinstance(cache_bytes, int | np.integer) or cache_bytes < 0:
            raise DataError(f"cache_bytes must be an integer >= 0 (bytes of RAM for segments), got {cache_bytes!r}")
        self.files = StoreFiles(backend, DataSpec.from_json(info["spec"]), info.get("codec", DEFAULT_CODEC))
        """Backend, spec, fields and sealed-segment listing, shared with the reader, writers and sampler."""
        self.backend = backend
        self.url = backend.url
        self.info = info
        """The root `amago_pipe_store` attribute: format version, spec, codec, creation info."""
        self.spec = self.files.spec
        self.codec: str = self.files.codec
        self.format_version: int = int(info["format_version"])
        self.fields = self.files.fields
        self.cache_bytes = int(cache_bytes)
        """RAM budget for decompressed segments used by `sample` (0: none held in RAM)."""
        self.disk_tier = bool(disk_tier)
        """`sample` keeps what does not fit `cache_bytes` in uncompressed local files instead of reading zarr."""
        self.cache_dir = Path(cache_dir) if cache_dir is not None else None
        """Where those files live (default: `<store>/.cache` for a local store, a user cache folder otherwise)."""
        self.refresh_seconds = float(refresh_seconds)
        """`sample` re-lists sealed segments at most this often (segments sealed through this object: at once)."""
        self.created = False
        """True when `create` made this store (rather than opening an existing one)."""
        self._sampler: WindowSampler | None = None

    # ------------------------------------------------------------ create / open

    @classmethod
    def create(
        cls,
        url: str | Path,
        spec: DataSpec,
        *,
        exist_ok: bool = False,
        codec: str = DEFAULT_CODEC,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        disk_tier: bool = True,
        cache_dir: str | Path | None = None,
    ) -> TrajectoryStore:
        """A new empty store at `url`. With exist_ok=True an existing store is opened and its spec checked.

        `created` on the result says whether this call made the store: of processes creating one store at
        once, exactly one does (on a local disk) and the others open it.
        """
        backend = backend_for(url)
        _check_not_a_file(backend)
        if backend.read_bytes("zarr.json") is None:
            segment_fields(spec)  # unsupported dtypes or keys fail before anything is written
            compressors(codec)  # and so do unknown codec names
            if any(not n.startswith(".tmp-") for n in backend.list_dir("")) and backend.read_bytes("zarr.json") is None:
                raise StoreFormatError(
                    f"{backend.url}: exists and is not empty but holds no zarr store; choose another path"
                )
            attrs = root_attrs(spec, codec)
            if backend.write_atomic("zarr.json", _group_json({ROOT_ATTR: attrs}), exclusive=True):
                backend.write_atomic(f"{PARTITIONS}/zarr.json", _group_json({}))
                store = cls(backend, attrs, cache_bytes=cache_bytes, disk_tier=disk_tier, cache_dir=cache_dir)
                store.created = True
                return store
        if not exist_ok:
            raise StoreFormatError(f"{backend.url}: a store already exists here; pass exist_ok=True to append to it")
        store = cls.open(url, cache_bytes=cache_bytes, disk_tier=disk_tier, cache_dir=cache_dir)
        _check_spec(store.spec, spec, store.url)
        return store

    @classmethod
    def open(
        cls,
        url: str | Path,
        *,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        refresh_seconds: float = 1.0,
        disk_tier: bool = True,
        cache_dir: str | Path | None = None,
    ) -> TrajectoryStore:
        """Open an existing store; StoreFormatError when it is missing, not a store, or of a newer format.
        `cache_bytes`, `disk_tier`, `cache_dir`: how `sample` keeps segments (see the attributes)."""
        backend = backend_for(url)
        _check_not_a_file(backend)
        raw = backend.read_bytes("zarr.json")
        if raw is None:
            hint = " (found a zarr v2 '.zgroup'; this store needs zarr v3)" if backend.exists(".zgroup") else ""
            raise StoreFormatError(f"{backend.url}: no trajectory store here (no zarr.json){hint}; create one first")
        try:
            doc = json.loads(raw)
        except ValueError as e:
            raise StoreFormatError(f"{backend.url}/zarr.json: not valid JSON ({e})") from e
        if doc.get("zarr_format") != 3 or doc.get("node_type") != "group":
            raise StoreFormatError(
                f"{backend.url}: expected a zarr v3 group, found zarr_format={doc.get('zarr_format')!r}"
            )
        info = check_root_attrs(doc.get("attributes") or {}, backend.url)
        return cls(
            backend,
            info,
            cache_bytes=cache_bytes,
            refresh_seconds=refresh_seconds,
            disk_tier=disk_tier,
            cache_dir=cache_dir,
        )

    @staticmethod
    def exists(url: str | Path) -> bool:
        """True when `url` holds a trajectory store (of any format version)."""
        raw = backend_for(url).read_bytes("zarr.json")
        if raw is None:
            return False
        try:
            return ROOT_ATTR in (json.loads(raw).get("attributes") or {})
        except ValueError:
            return False

    def __repr__(self) -> str:
        return f"TrajectoryStore({self.url!r}, partitions={self.partitions()})"

    # ------------------------------------------------------------ partitions

    def partitions(self) -> list[str]:
        """Names of the partitions, sorted."""
        return self.files.partitions()

    def _require(self, partition: str) -> str:
        check_partition_name(partition)
        if not self.backend.exists(f"{partition_key(partition)}/zarr.json"):
            known = self.partitions()
            raise DataError(
                f"{self.url}: no partition '{partition}' (partitions: {', '.join(known) or 'none'})"
                f"{did_you_mean(partition, known)}"
            )
        return partition

    def partition_config(self, partition: str) -> tuple[PartitionKind, int | None]:
        """`(kind, capacity_timesteps)` of an existing partition."""
        raw = self.backend.read_bytes(f"{partition_key(self._require(partition))}/zarr.json")
        attrs = (json.loads(raw).get("attributes") or {}) if raw else {}
        kind = attrs.get("kind") or default_kind(partition)
        capacity = attrs.get("capacity_timesteps")
        return check_kind(kind), (int(capacity) if capacity is not None else None)

    def configure_partition(
        self, name: str, *, kind: PartitionKind | None = None, capacity_timesteps: int | None = None
    ) -> None:
        """Create or reconfigure a partition; a fifo capacity applies at once (oldest episodes evicted)."""
        check_partition_name(name)
        kind = check_kind(kind or default_kind(name))
        if capacity_timesteps is not None:
            if kind != "fifo":
                raise DataError(f"partition '{name}': capacity_timesteps applies to fifo partitions only, not {kind}")
            if int(capacity_timesteps) < 1:
                raise DataError(f"partition '{name}': capacity_timesteps must be >= 1, got {capacity_timesteps}")
        attrs = {"kind": kind, "capacity_timesteps": None if capacity_timesteps is None else int(capacity_timesteps)}
        self.backend.write_atomic(f"{partition_key(name)}/zarr.json", _group_json(attrs))
        if capacity_timesteps is not None:
            self.evict(name, int(capacity_timesteps))

    def _ensure_partition(self, name: str) -> None:
        check_partition_name(name)
        if not self.backend.exists(f"{partition_key(name)}/zarr.json"):
            attrs = {"kind": default_kind(name), "capacity_timesteps": None}
            self.backend.write_atomic(f"{partition_key(name)}/zarr.json", _group_json(attrs))

    def partition_info(self, name: str) -> PartitionInfo:
        """Episodes, timesteps, bytes and return statistics, from the seal markers (no data is read)."""
        kind, capacity = self.partition_config(name)
        markers = self.files.markers(name)
        returns = np.concatenate([m.returns for m in markers]) if markers else np.zeros(0)
        has = len(returns) > 0
        return PartitionInfo(
            name=name,
            kind=kind,
            capacity_timesteps=capacity,
            segments=len(markers),
            episodes=int(sum(m.info.episodes for m in markers)),
            timesteps=int(sum(m.info.timesteps for m in markers)),
            bytes=int(sum(m.info.bytes for m in markers)),
            return_mean=float(returns.mean()) if has else float("nan"),
            return_std=float(returns.std()) if has else float("nan"),
            return_min=float(returns.min()) if has else float("nan"),
            return_max=float(returns.max()) if has else float("nan"),
        )

    def segments(self, partition: str) -> list[SegmentInfo]:
        """Sealed segments of a partition, oldest first (none for a partition not created yet)."""
        return [m.info for m in self.files.markers(check_partition_name(partition))]

    def markers(self, partition: str) -> list[SegmentMarker]:
        """Sealed segments with their episode tables (lengths, time starts, returns), oldest first."""
        return self.files.markers(check_partition_name(partition))

    # ------------------------------------------------------------ writing and removing

    def writer(
        self,
        partition: str,
        *,
        atomic: bool = False,
        attrs: dict[str, Any] | None = None,
        segment_timesteps: int = 100_000,
    ) -> SegmentWriter:
        """A context manager appending episodes to `partition` (created on first use, kind by its name).

        Segments are sealed (become visible) when they hold `segment_timesteps`, on `flush()` and on exit.
        atomic=True: one segment for the whole session, visible at once on clean exit, nothing on error.
        In a fifo partition with a capacity, segments are capped at capacity/8 so eviction rarely has to
        rewrite a segment. Unsealed segments left by dead writers of this host are reclaimed first.
        """
        self._ensure_partition(partition)
        reclaim_abandoned(self.files, partition)
        kind, capacity = self.partition_config(partition)
        if kind == "fifo" and capacity is not None and not atomic:
            segment_timesteps = min(segment_timesteps, max(1, capacity // 8))
        return SegmentWriter(
            self.files,
            partition,
            on_seal=self.segment_sealed,
            atomic=atomic,
            attrs=attrs,
            segment_timesteps=segment_timesteps,
        )

    def segment_sealed(self, marker: SegmentMarker) -> None:
        """Record a segment sealed by a `SegmentBuilder` of this store, then apply its partition's fifo capacity."""
        self.files.sealed(marker)
        kind, capacity = self.partition_config(marker.info.partition)
        if kind == "fifo" and capacity is not None:
            self.evict(marker.info.partition, capacity)

    def drop_segments(self, partition: str, segment_ids: list[str]) -> None:
        """Remove sealed segments (marker first, so readers stop seeing them before any data goes). Ids that
        are already gone are skipped: another process may have evicted them."""
        self.files.drop(self._require(partition), segment_ids)

    def evict(self, partition: str, max_timesteps: int) -> int:
        """Remove the oldest whole episodes until at most `max_timesteps` remain; returns timesteps removed.

        Granularity is the episode: older segments are dropped whole and the segment at the boundary is
        rewritten with its newest episodes; an episode longer than `max_timesteps` is removed. Protected
        partitions are refused (DataError). See `amago_pipe.store.eviction`.
        """
        from amago_pipe.store.eviction import evict

        kind, _ = self.partition_config(partition)
        if kind == "protected":
            raise DataError(
                f"partition '{partition}' is protected and never evicted; to remove its data, copy the partitions "
                f"to keep into a new store (`amago-pipe store copy SRC DST --partition NAME`), or replace a "
                f"conversion with `amago-pipe convert ... --force`"
            )
        return evict(self.files, partition, max_timesteps)

    # ------------------------------------------------------------ reading

    def iter_episodes(self, partition: str) -> Iterator[Episode]:
        """Every episode of a partition, oldest segment first. Segments evicted meanwhile are skipped."""
        for marker in self.files.markers(check_partition_name(partition)):
            try:
                yield from iter_segment_episodes(self.files, marker)
            except SegmentVanished:
                continue

    def rewards(self, partition: str) -> np.ndarray:
        """(steps,) float32 rewards of every episode of a partition, oldest segment first (one read per segment)."""
        parts = []
        for marker in self.files.markers(check_partition_name(partition)):
            try:
                parts.append(read_rewards(self.files, marker))
            except SegmentVanished:
                continue
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.float32)

    def fingerprint(self, partition: str | None = None) -> str:
        """Cheap hash of the sealed segment listing (segments are immutable, so the listing names the data)."""
        names = self.partitions() if partition is None else [check_partition_name(partition)]
        h = hashlib.sha256(json.dumps(self.info["spec"], sort_keys=True).encode())
        for name in names:
            for m in self.files.markers(name):
                h.update(f"{name}/{m.info.id}:{m.info.rows}\n".encode())
        return h.hexdigest()[:20]

    def sample(
        self,
        batch_size: int,
        seq_len: int,
        *,
        partitions: dict[str, float] | None = None,
        rng: np.random.Generator,
        mode: str = "timesteps",
        balance: str = "none",
        tasks: bool = False,
    ) -> WindowBatch:
        """`batch_size` windows of `seq_len` steps (numpy), deterministic for a seed and the store contents.

        `partitions` maps names to mixture weights (default: every partition, in proportion to its data);
        empty partitions drop out of the mixture. `mode`: "timesteps" (default; no timestep, episode ends
        included, is under-sampled), "episodes" or "starts" (AMAGO's slices); `balance="task"` gives every task
        (episode env name) of a partition the same share; see `amago_pipe.store.windows`. `tasks=True` fills
        the batch's `env_names` (each window's task).
        Segments fitting `cache_bytes` are gathered from RAM, the others read from the disk tier (or zarr).
        """
        return self._window_sampler().sample(
            batch_size, seq_len, partitions=partitions, rng=rng, mode=mode, balance=balance, tasks=tasks
        )

    def task_names(self, partition: str) -> list[str]:
        """The distinct env names (tasks) of a partition's episodes, sorted (from the seal markers)."""
        return self._window_sampler().task_names(check_partition_name(partition))

    def warm(self, partitions: list[str] | None = None) -> dict[str, int]:
        """Fill the RAM and spill arenas and build the tier files now, rather than when sampling first needs them;
        returns segment counts (`ram`, `spill`, `tier`, `zarr`; see `WindowSampler.warm`)."""
        return self._window_sampler().warm(partitions)

    def _window_sampler(self) -> WindowSampler:
        if self._sampler is None:
            from amago_pipe.store.sampler import WindowSampler
            from amago_pipe.store.tier import DiskTier

            tier = DiskTier.for_store(self.files, self.cache_dir) if self.disk_tier else None
            self._sampler = WindowSampler(
                self.files, cache_bytes=self.cache_bytes, refresh_seconds=self.refresh_seconds, tier=tier
            )
        return self._sampler

    def refresh(self) -> None:
        """Make the next `sample` re-list segments sealed or evicted by other processes."""
        if self._sampler is not None:
            self._sampler.invalidate()


def _check_not_a_file(backend: Backend) -> None:
    if backend.is_file(""):
        raise StoreFormatError(
            f"{backend.url}: is a regular file, not a trajectory store (a directory); give a directory path, "
            "e.g. one ending in .zarr"
        )


def _check_spec(store_spec: DataSpec, spec: DataSpec, url: str) -> None:
    store_spec.check_compatible(spec, what="the given spec", against=f"store at {url}")
    for key, mine in store_spec.goals.items():
        theirs = spec.goals[key]
        if mine.shape != theirs.shape or mine.dtype != theirs.dtype:
            raise DataError(
                f"the given spec does not match the store at {url}: goals['{key}']: store has shape {mine.shape} "
                f"{mine.dtype}, given spec has {theirs.shape} {theirs.dtype}"
            )
