"""The on-disk layout of a trajectory store: key paths, root attributes, codecs, chunking, segment ids.

One store is one Zarr v3 hierarchy:

    zarr.json                                   root group; attrs["amago_pipe_store"] = format, spec, creation
    partitions/<name>/zarr.json                 partition group; attrs = {"kind", "capacity_timesteps"}
    partitions/<name>/segments/<id>/...         one segment: a zarr group of step-aligned arrays
    partitions/<name>/sealed/<id>.json          seal marker, written last (atomically); lists the episode table
    quarantine/<name>/<id>/                     damaged segments moved aside by `verify --quarantine`
    .cache/tier/<name>/<id>.raw                 local uncompressed copy of a segment's images (tier.py; disposable)
    .cache/spill/                               nameless mapped files of samplers (cache.py; gone with them)

numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import os
import platform
import re
import secrets
import socket
import time
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from amago_pipe._version import __version__
from amago_pipe.errors import DataError, StoreFormatError, did_you_mean
from amago_pipe.spec import DataSpec

FORMAT_NAME = "amago-pipe/trajectory-store"
FORMAT_VERSION = 1
"""Bump when the layout changes; readers refuse stores with a newer version."""
ROOT_ATTR = "amago_pipe_store"
PARTITIONS = "partitions"
QUARANTINE = "quarantine"
CODECS = ("zstd", "lz4", "none")
DEFAULT_CODEC = "lz4"
CHUNK_TARGET_BYTES = 1 << 20
"""Uncompressed bytes per chunk along the time axis (features are never split)."""
MIN_CHUNK_ROWS = 256
"""Rows per chunk at least, for large rows (256 84x84x4 frames are 7.2 MB): a window of up to 256 steps spans at most
two chunks, and zarr's fixed cost per chunk stays small beside its bytes (pixel conversion ~1.6x faster than with
1 MB chunks of 32 frames)."""
MAX_CHUNK_ROWS = 1 << 16
STORABLE_KINDS = "biuf"
"""numpy dtype kinds a segment array may have: bool, signed and unsigned integers, floats."""
PartitionKind = Literal["protected", "fifo", "plain"]
PARTITION_KINDS: tuple[str, ...] = ("protected", "fifo", "plain")
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_SEGMENT_ID_RE = re.compile(r"^(\d{19})-(\d{7})-([0-9a-f]{6})$")


# ---------------------------------------------------------------- key paths


def partition_key(partition: str) -> str:
    """The partition's group."""
    return f"{PARTITIONS}/{partition}"


def segments_key(partition: str) -> str:
    """The folder of the partition's segments, sealed or not."""
    return f"{PARTITIONS}/{partition}/segments"


def segment_key(partition: str, segment_id: str) -> str:
    """One segment's group."""
    return f"{PARTITIONS}/{partition}/segments/{segment_id}"


def sealed_key(partition: str) -> str:
    """The folder of the partition's seal markers."""
    return f"{PARTITIONS}/{partition}/sealed"


def marker_key(partition: str, segment_id: str) -> str:
    """One segment's seal marker."""
    return f"{PARTITIONS}/{partition}/sealed/{segment_id}.json"


def quarantine_key(partition: str, segment_id: str) -> str:
    """Where `verify --quarantine` moves a damaged segment."""
    return f"{QUARANTINE}/{partition}/{segment_id}"


# ---------------------------------------------------------------- names and ids


def check_partition_name(name: str) -> str:
    """Return `name` if it is a valid partition name, else raise DataError."""
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise DataError(
            f"invalid partition name {name!r}: use letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return name


def default_kind(partition: str) -> PartitionKind:
    """Kind a partition gets when first written without `configure_partition`: by name."""
    if partition == "protected":
        return "protected"
    if partition == "fifo":
        return "fifo"
    return "plain"


def check_kind(kind: str) -> PartitionKind:
    """Return `kind` if it is a partition kind, else raise DataError with a did-you-mean."""
    if kind not in PARTITION_KINDS:
        raise DataError(
            f"unknown partition kind {kind!r} (known: {', '.join(PARTITION_KINDS)}){did_you_mean(kind, PARTITION_KINDS)}"
        )
    return kind  # type: ignore[return-value]


def new_segment_id(created_ns: int | None = None) -> str:
    """`<time_ns>-<pid>-<random>`: ids sort by creation time, so FIFO eviction drops the oldest first.
    `created_ns` backdates the id (a trimmed segment keeps the place of the one it replaces)."""
    stamp = time.time_ns() if created_ns is None else created_ns
    return f"{stamp:019d}-{os.getpid() % 10_000_000:07d}-{secrets.token_hex(3)}"


def is_segment_id(name: str) -> bool:
    """True for ids made by `new_segment_id`."""
    return bool(_SEGMENT_ID_RE.match(name))


def segment_created(segment_id: str) -> float:
    """Unix time at which a segment was started (from its id)."""
    m = _SEGMENT_ID_RE.match(segment_id)
    return int(m.group(1)) / 1e9 if m else 0.0


def segment_pid(segment_id: str) -> int | None:
    """The writer's pid (modulo 10**7) recorded in a segment id; None for other ids."""
    m = _SEGMENT_ID_RE.match(segment_id)
    return int(m.group(2)) if m else None


def segment_origin(segment_id: str) -> str:
    """`<time_ns>-<pid>`: what a segment shares with the copies this process trimmed from it (see eviction)."""
    return segment_id.rsplit("-", 1)[0] if _SEGMENT_ID_RE.match(segment_id) else segment_id


def writer_info() -> dict[str, Any]:
    """Who writes a segment: used by `verify` to tell abandoned segments from ones still being written."""
    return {"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}


# ---------------------------------------------------------------- root attributes


def root_attrs(spec: DataSpec, codec: str) -> dict[str, Any]:
    """The `amago_pipe_store` root attribute of a new store."""
    import zarr

    return {
        "format": FORMAT_NAME,
        "format_version": FORMAT_VERSION,
        "spec": spec.to_json(),
        "codec": codec,
        "created": {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "amago_pipe": __version__,
            "zarr": zarr.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            "host": socket.gethostname(),
        },
    }


def check_root_attrs(attrs: dict[str, Any], where: str) -> dict[str, Any]:
    """Validate the root attribute of an existing store; StoreFormatError names what is wrong."""
    info = attrs.get(ROOT_ATTR)
    if not isinstance(info, dict) or info.get("format") != FORMAT_NAME:
        raise StoreFormatError(
            f"{where}: a zarr group but not an amago-pipe trajectory store (root attribute "
            f"'{ROOT_ATTR}' is missing); create a store with TrajectoryStore.create or a convert stage"
        )
    version = info.get("format_version")
    if not isinstance(version, int) or version < 1:
        raise StoreFormatError(f"{where}: malformed store format version {version!r}; expected a positive integer")
    if version > FORMAT_VERSION:
        raise StoreFormatError(
            f"{where}: store format version {version} is newer than this amago-pipe reads "
            f"(up to {FORMAT_VERSION}); upgrade amago-pipe to open it"
        )
    if info.get("codec", DEFAULT_CODEC) not in CODECS:
        raise StoreFormatError(
            f"{where}: unknown codec {info.get('codec')!r} in the store attributes (known: {', '.join(CODECS)})"
        )
    if not isinstance(info.get("spec"), dict):
        raise StoreFormatError(
            f"{where}/zarr.json: root attribute '{ROOT_ATTR}' has no data spec ('spec'); the store's metadata is "
            "damaged — restore zarr.json from a copy of the store, or convert the data into a new store"
        )
    try:
        segment_fields(DataSpec.from_json(info["spec"]))
    except DataError as e:
        raise StoreFormatError(
            f"{where}/zarr.json: the stored data spec is unusable ({e}); convert the data into a new store"
        ) from e
    return info


# ---------------------------------------------------------------- fields, codecs, chunks


@dataclass(frozen=True)
class FieldSpec:
    """One per-row array of a segment: obs/<key>, goals/<key>, actions, rewards, terminated, truncated."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype[Any]

    @property
    def row_bytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize


def segment_fields(spec: DataSpec) -> dict[str, FieldSpec]:
    """The arrays every segment holds, in a fixed order. Rows are step-aligned: row t holds obs_t and the
    action, reward and flags that follow it; the last row of each episode holds obs_T and zero padding."""
    fields: dict[str, FieldSpec] = {}
    for key, arr in spec.observations.items():
        dt = storable_dtype(arr.dtype, f"observations['{key}']")
        fields[f"obs/{key}"] = FieldSpec(f"obs/{key}", tuple(arr.shape), dt)
    for key, arr in spec.goals.items():
        fields[f"goals/{key}"] = FieldSpec(
            f"goals/{key}", tuple(arr.shape), storable_dtype(arr.dtype, f"goals['{key}']")
        )
    fields["actions"] = FieldSpec("actions", tuple(spec.action.shape), np.dtype(spec.action.dtype))
    fields["rewards"] = FieldSpec("rewards", (), np.dtype(np.float32))
    fields["terminated"] = FieldSpec("terminated", (), np.dtype(np.bool_))
    fields["truncated"] = FieldSpec("truncated", (), np.dtype(np.bool_))
    for name in fields:
        for part in name.split("/")[1:]:
            if not part or part in (".", "..") or part.startswith("__"):
                raise DataError(
                    f"observation/goal key {name.split('/', 1)[1]!r} cannot be stored: empty, '.', '..' or '__' parts"
                )
    return fields


def storable_dtype(dtype: Any, what: str) -> np.dtype[Any]:
    """`dtype` as a numpy dtype if the store can hold it (bool, integers, floats); DataError naming `what` otherwise."""
    try:
        dt: np.dtype[Any] = np.dtype(dtype)
    except TypeError as e:
        raise DataError(
            f"{what}: dtype {dtype!r} is not a numpy dtype; the store holds bool, integer and float arrays"
        ) from e
    if dt.kind not in STORABLE_KINDS or dt.fields is not None:
        kind = {"S": "byte strings", "U": "unicode strings", "O": "Python objects", "V": "raw/structured records"}
        raise DataError(
            f"{what}: dtype {dt.str} ({kind.get(dt.kind, 'not a plain number')}) cannot be stored; the store holds "
            "bool, integer and float arrays — convert the data to numbers first, or leave this key out"
        )
    return dt


def chunk_rows(row_bytes: int, expected_rows: int | None = None) -> int:
    """Rows per chunk: a power of two near CHUNK_TARGET_BYTES and at least MIN_CHUNK_ROWS, no larger than the
    expected segment."""
    rows = max(MIN_CHUNK_ROWS, CHUNK_TARGET_BYTES // max(1, row_bytes))
    rows = min(1 << (rows.bit_length() - 1), MAX_CHUNK_ROWS)
    if expected_rows is not None and expected_rows > 0:
        rows = min(rows, 1 << max(0, (expected_rows - 1).bit_length()))
    return max(1, rows)


def compressors(codec: str) -> Any:
    """zarr v3 compressor list for a codec name (blosc with byte shuffle; lz4 by default, or zstd level 3),
    each chunk ending in a crc32c checksum so that reads detect damaged chunks."""
    from zarr.codecs import BloscCodec, Crc32cCodec

    if codec == "none":
        return [Crc32cCodec()]
    if codec == "zstd":
        return [BloscCodec(cname="zstd", clevel=3, shuffle="shuffle"), Crc32cCodec()]
    if codec == "lz4":
        return [BloscCodec(cname="lz4", clevel=5, shuffle="shuffle"), Crc32cCodec()]
    raise DataError(f"unknown codec {codec!r} (known: {', '.join(CODECS)}){did_you_mean(codec, CODECS)}")
