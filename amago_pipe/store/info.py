"""Plain records the store hands out: segment markers, SegmentInfo, PartitionInfo and WindowBatch.

numpy only; must not import torch or click.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from amago_pipe.errors import StoreFormatError
from amago_pipe.store.format import FORMAT_VERSION, segment_created


@dataclass(frozen=True)
class SegmentInfo:
    """A sealed segment: what `TrajectoryStore.segments()` lists."""

    id: str
    partition: str
    episodes: int
    timesteps: int
    rows: int
    """Stored rows: timesteps + episodes (each episode keeps its final observation)."""
    bytes: int
    """Bytes on disk when sealed."""
    created: float
    """Unix time the segment was started (segment ids sort by it)."""
    sealed: float
    attrs: dict[str, Any] = field(default_factory=dict)
    """Attributes given to the writer, e.g. {"source_fingerprint": ..., "source": "minari:..."}."""


@dataclass(frozen=True)
class SegmentMarker:
    """The seal marker of a segment: its SegmentInfo plus the episode table (lengths, time starts, returns)."""

    info: SegmentInfo
    lengths: np.ndarray
    """(E,) int64 steps per episode."""
    time_starts: np.ndarray
    """(E,) int64 absolute time index of each episode's first observation."""
    returns: np.ndarray
    """(E,) float64 episode returns."""
    env_names: tuple[str, ...] | None = None
    """(E,) each episode's env (task) name; None in markers written before they were recorded."""

    @property
    def row_offsets(self) -> np.ndarray:
        """(E,) int64 first row of each episode inside the segment."""
        sizes = self.lengths + 1
        return np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)

    def to_json(self) -> bytes:
        i = self.info
        doc = {
            "format_version": FORMAT_VERSION,
            "id": i.id,
            "partition": i.partition,
            "episodes": i.episodes,
            "timesteps": i.timesteps,
            "rows": i.rows,
            "bytes": i.bytes,
            "created": i.created,
            "sealed": i.sealed,
            "attrs": i.attrs,
            "lengths": self.lengths.tolist(),
            "time_starts": self.time_starts.tolist(),
            "returns": self.returns.tolist(),
            **({"env_names": list(self.env_names)} if self.env_names is not None else {}),
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> SegmentMarker:
        """Parse a marker; StoreFormatError says which field is wrong."""
        try:
            doc = json.loads(data)
            lengths = np.asarray(doc["lengths"], dtype=np.int64)
            time_starts = np.asarray(doc["time_starts"], dtype=np.int64)
            returns = np.asarray(doc["returns"], dtype=np.float64)
            env_names = tuple(str(n) for n in doc["env_names"]) if "env_names" in doc else None
            info = SegmentInfo(
                id=str(doc["id"]),
                partition=str(doc["partition"]),
                episodes=int(doc["episodes"]),
                timesteps=int(doc["timesteps"]),
                rows=int(doc["rows"]),
                bytes=int(doc.get("bytes", 0)),
                created=float(doc.get("created", segment_created(str(doc["id"])))),
                sealed=float(doc.get("sealed", 0.0)),
                attrs=dict(doc.get("attrs") or {}),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise StoreFormatError(
                f"{where}: unreadable seal marker ({e!r}); run `amago-pipe store verify STORE --quarantine` "
                "to move the segment aside"
            ) from e
        if int(doc.get("format_version", 1)) > FORMAT_VERSION:
            raise StoreFormatError(
                f"{where}: segment format {doc['format_version']} is newer than supported ({FORMAT_VERSION})"
            )
        n = info.episodes
        if not (len(lengths) == len(time_starts) == len(returns) == n) or len(env_names or lengths) != n:
            raise StoreFormatError(f"{where}: episode table has {len(lengths)} lengths for {n} episodes")
        if int(lengths.sum()) != info.timesteps or info.timesteps + n != info.rows or (n and int(lengths.min()) < 1):
            raise StoreFormatError(
                f"{where}: episode table does not add up (timesteps {info.timesteps}, rows {info.rows}, "
                f"sum of lengths {int(lengths.sum())}, episodes {n})"
            )
        return cls(info, lengths, time_starts, returns, env_names)


@dataclass(frozen=True)
class PartitionInfo:
    """Counts, size and return statistics of one partition, computed from the seal markers (no data scan)."""

    name: str
    kind: str
    capacity_timesteps: int | None
    segments: int
    episodes: int
    timesteps: int
    bytes: int
    return_mean: float
    return_std: float
    return_min: float
    return_max: float

    def to_json(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass
class WindowBatch:
    """A batch of B windows of L steps (numpy). Everything past the mask is zero (obs, time, actions, ...).

    Window b covers observations `obs[b, 0..L]` and the L actions taken from them; `mask[b, t]` says step t
    (action t, reward t, obs t+1) is real. Windows never cross episode boundaries.
    """

    obs: dict[str, np.ndarray]
    """(B, L+1, ...) by observation key."""
    actions: np.ndarray
    """(B, L, ...) in the stored dtype (integer ids for discrete)."""
    rewards: np.ndarray
    """(B, L) float32."""
    terminated: np.ndarray
    """(B, L) bool."""
    truncated: np.ndarray
    """(B, L) bool."""
    time: np.ndarray
    """(B, L+1) int64 absolute time index of each observation."""
    mask: np.ndarray
    """(B, L) bool: valid steps."""
    goals: dict[str, np.ndarray]
    """(B, L+1, G) by goal key."""
    prev_actions: np.ndarray
    """(B, ...) the action before the window's first observation (zeros at an episode start)."""
    prev_rewards: np.ndarray
    """(B,) float32 the reward before the window's first observation (zero at an episode start)."""
    partition: np.ndarray
    """(B,) int index into `partition_names` of the partition each window came from."""
    partition_names: tuple[str, ...] = ()
    env_names: tuple[str, ...] = ()
    """Each window's episode env name (its task), when sampled with `tasks=True`; else empty."""

    @property
    def batch_size(self) -> int:
        return int(self.mask.shape[0])

    @property
    def seq_len(self) -> int:
        return int(self.mask.shape[1])

    @property
    def obs_mask(self) -> np.ndarray:
        """(B, L+1) bool: valid observations (the first one always, then one per valid step)."""
        first = np.ones((self.batch_size, 1), dtype=bool)
        return np.concatenate([first, self.mask], axis=1)
