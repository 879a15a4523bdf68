"""`DiskTier`: the big fields (images) of sealed segments, decompressed once into local uncompressed files and read
window by window.

One file per segment (`<tier dir>/<partition>/<segment id>.raw`), written under a temporary name, flushed and
renamed into place, then reused by every process of the host. Windows are read with positioned reads straight
into the batch (no mmap: the page cache holds the file, the process RSS only the batch). A file whose size,
header or trailer is wrong is removed and rebuilt. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import time
import warnings
import zlib
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.processes import pid_alive
from amago_pipe.store.backend import Backend, LocalBackend
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import FieldSpec, marker_key
from amago_pipe.store.info import SegmentMarker, WindowBatch
from amago_pipe.store.reader import check_still_sealed, open_segment, read_block

MAGIC = b"AMAGO-PIPE-TIER1"
TRAILER = b"AMAGO-PIPE-TEND1"
HEADER_BYTES = 4096
"""The JSON header's room; regions start at multiples of this."""
TRAILER_BYTES = 32
BIG_FIELD_BYTES = 1024
"""Observation/goal fields with rows at least this large (images) are kept in tier files and read straight into
the batch; the smaller fields of segments not in RAM live in the sampler's spill arena (cache.py)."""
BUILD_BLOCK_BYTES = 16 << 20
FREE_DISK_MARGIN = 1 << 30
"""A tier file is written only while the disk keeps this much free beside it."""
OPEN_FILES = 128
STALE_TEMP_SECONDS = 60.0
"""A temporary file of a dead builder is removed once it is this old (its pid may be another host's)."""


class TierWarning(UserWarning):
    """The disk tier could not be used for a segment (no space, not writable): its windows are read from zarr."""


class TornTierFile(Exception):
    """A tier file changed under its reader (truncated or replaced); it is rebuilt."""


def default_tier_dir(backend: Backend) -> Path:
    """`<store>/.cache/tier` for a local store; for a remote one, a folder of `$AMAGO_PIPE_CACHE_DIR` (default
    `$XDG_CACHE_HOME/amago-pipe` or `~/.cache/amago-pipe`) named after a hash of the store URL."""
    if isinstance(backend, LocalBackend):
        return backend.root / ".cache" / "tier"
    base = os.environ.get("AMAGO_PIPE_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "amago-pipe"
    )
    return Path(base) / "stores" / hashlib.sha256(backend.url.encode()).hexdigest()[:16] / "tier"


@dataclass(frozen=True)
class TierLayout:
    """Where a segment's rows lie in its tier file: one region per big field, in field order."""

    big: tuple[str, ...]
    offsets: dict[str, int]
    """Byte offset of each big field's region."""
    row_bytes: dict[str, int]
    size: int
    header: bytes


def big_fields(fields: dict[str, FieldSpec]) -> tuple[str, ...]:
    """The observation/goal fields whose rows are BIG_FIELD_BYTES or more (images): the ones a tier file holds."""
    return tuple(n for n, f in fields.items() if n.startswith(("obs/", "goals/")) and f.row_bytes >= BIG_FIELD_BYTES)


def tier_layout(fields: dict[str, FieldSpec], marker: SegmentMarker) -> TierLayout:
    """The layout of `marker`'s segment; the header names the segment and the fields, so a file of another
    segment or spec never matches."""
    rows = marker.info.rows
    big = big_fields(fields)
    row_bytes = {n: fields[n].row_bytes for n in big}
    offsets, cursor = {}, HEADER_BYTES
    for name in big:
        offsets[name] = cursor
        cursor += -(-rows * row_bytes[name] // HEADER_BYTES) * HEADER_BYTES
    doc = {
        "format": "amago-pipe/disk-tier",
        "version": 1,
        "partition": marker.info.partition,
        "segment": marker.info.id,
        "rows": rows,
        "fields": [[n, list(fields[n].shape), fields[n].dtype.str] for n in big],
        "offsets": offsets,
        "size": cursor + TRAILER_BYTES,
    }
    header = MAGIC + json.dumps(doc, sort_keys=True).encode()
    if len(header) > HEADER_BYTES:
        raise ValueError(f"tier header of {len(header)} bytes does not fit {HEADER_BYTES}")  # hundreds of fields
    return TierLayout(big, offsets, row_bytes, cursor + TRAILER_BYTES, header)


def trailer(layout: TierLayout) -> bytes:
    """Written last: the magic, the file size and the header's checksum."""
    return TRAILER + layout.size.to_bytes(8, "little") + zlib.crc32(layout.header).to_bytes(8, "little")


@dataclass
class TierFile:
    """An open, checked tier file."""

    fd: int
    layout: TierLayout

    def __post_init__(self) -> None:
        self.big_at = [(self.layout.offsets[n], self.layout.row_bytes[n]) for n in self.layout.big]
        """(offset, row bytes) of each big field's region, in `layout.big` order."""


class DiskTier:
    """Opens (building when missing or torn) and reads the tier files of one store's sealed segments."""

    def __init__(self, files: StoreFiles, root: Path):
        self.files = files
        self.root = root
        self._open: OrderedDict[str, TierFile] = OrderedDict()
        self.unavailable: dict[str, str] = {}
        """Segment key -> why it has no tier file (no space, not writable); its windows are read from zarr."""
        self.built = 0
        """Tier files this object wrote."""

    @classmethod
    def for_store(cls, files: StoreFiles, cache_dir: Path | None) -> DiskTier:
        """The tier of a store: in `cache_dir`/tier, or `default_tier_dir`."""
        return cls(files, cache_dir / "tier" if cache_dir is not None else default_tier_dir(files.backend))

    def path(self, partition: str, segment_id: str) -> Path:
        return self.root / partition / f"{segment_id}.raw"

    def handle(self, marker: SegmentMarker) -> TierFile | None:
        """The open tier file of a sealed segment, built first when missing or torn; None when it cannot be built.

        SegmentVanished when the segment was evicted meanwhile; DataError when its zarr data are damaged."""
        key = f"{marker.info.partition}/{marker.info.id}"
        if key in self._open:
            self._open.move_to_end(key)
            return self._open[key]
        if key in self.unavailable:
            return None
        layout = tier_layout(self.files.fields, marker)
        path = self.path(marker.info.partition, marker.info.id)
        fd = _open_valid(path, layout)
        if fd is None:
            try:
                self._build(marker, layout, path)
            except OSError as e:
                self.unavailable[key] = f"{type(e).__name__}: {e}"
                warnings.warn(
                    f"{self.files.url}: no disk-tier file for segment {key} at {path} ({self.unavailable[key]}); its "
                    "windows are read from zarr (~1 ms a read); free disk space or pass cache_dir= to "
                    "TrajectoryStore.open",
                    TierWarning,
                    stacklevel=4,
                )
                return None
            fd = _open_valid(path, layout)
            if fd is None:  # replaced by a concurrent builder with a torn file: read from zarr this time
                return None
        self._open[key] = TierFile(fd, layout)
        if len(self._open) > OPEN_FILES:
            os.close(self._open.popitem(last=False)[1].fd)
        return self._open[key]

    def forget(self, key: str) -> None:
        """Close a segment's file (after a failed read: the next `handle` checks it again)."""
        tf = self._open.pop(key, None)
        if tf is not None:
            os.close(tf.fd)

    def _build(self, marker: SegmentMarker, layout: TierLayout, path: Path) -> None:
        """Decompress the segment block by block into a temporary file, flush it, rename it into place."""
        path.parent.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(path.parent).free
        if free < layout.size + FREE_DISK_MARGIN:
            raise OSError(f"needs {layout.size:,} bytes, {free:,} free (keeping {FREE_DISK_MARGIN:,})")
        _, opened = open_segment(self.files, marker)
        arrays = {n: opened[n] for n in layout.big}
        tmp = path.parent / f".tmp-{os.getpid()}-{secrets.token_hex(4)}-{path.name}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            os.ftruncate(fd, layout.size)
            _write_all(fd, layout.header, 0)
            for lo, hi in row_blocks(arrays, marker.info.rows, BUILD_BLOCK_BYTES):
                for name, value in read_block(self.files, marker, arrays, lo, hi).items():
                    _write_all(fd, np.ascontiguousarray(value), layout.offsets[name] + lo * layout.row_bytes[name])
            check_still_sealed(self.files, marker.info.partition, marker.info.id)
            _write_all(fd, trailer(layout), layout.size - TRAILER_BYTES)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(tmp, path)
        self.built += 1

    def read_windows(
        self, batch: WindowBatch, windows: np.ndarray, tfs: list[TierFile], first: np.ndarray, n_obs: np.ndarray
    ) -> None:
        """Read the big fields of batch rows `windows` (n,), window i from tier file `tfs[i]`: its observations at
        segment rows [first, first + n_obs), straight into the batch (the positions past them stay as they are)."""
        for j, name in enumerate(tfs[0].layout.big):
            target = self._target(batch, name)
            for tf, b, f0, k in zip(tfs, windows.tolist(), first.tolist(), n_obs.tolist()):
                at, row_bytes = tf.big_at[j]
                _read_into(tf.fd, target[b, :k].reshape(-1).view(np.uint8).data, at + f0 * row_bytes)

    @staticmethod
    def _target(batch: WindowBatch, name: str) -> np.ndarray:
        return batch.obs[name[4:]] if name.startswith("obs/") else batch.goals[name[6:]]

    def sweep(self, partition: str, live: set[str]) -> None:
        """Remove the files of segments no longer sealed (checked against their markers, so a segment sealed after
        this process listed the partition keeps its file) and the temporary files of dead builders."""
        folder = self.root / partition
        try:
            names = os.listdir(folder)
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            if name.startswith(".tmp-"):
                pid = name.split("-")[1]
                if pid.isdigit() and not pid_alive(int(pid)) and _age(folder / name) > STALE_TEMP_SECONDS:
                    (folder / name).unlink(missing_ok=True)
            elif name.endswith(".raw"):
                sid = name[:-4]
                if sid not in live and not self.files.backend.exists(marker_key(partition, sid)):
                    (folder / name).unlink(missing_ok=True)
                    self.forget(f"{partition}/{sid}")

    def close(self) -> None:
        for key in list(self._open):
            self.forget(key)

    def __del__(self) -> None:
        for tf in self._open.values():
            with contextlib.suppress(OSError):
                os.close(tf.fd)


def row_blocks(arrays: dict[str, Any], rows: int, block_bytes: int) -> list[tuple[int, int]]:
    """[lo, hi) row ranges of about `block_bytes` over `arrays` together, each a whole number of chunks."""
    chunk = max(int(a.chunks[0]) for a in arrays.values())
    row_bytes = sum(int(np.prod(a.shape[1:], dtype=np.int64)) * a.dtype.itemsize for a in arrays.values())
    step = max(chunk, block_bytes // max(1, row_bytes) // chunk * chunk)
    return [(lo, min(rows, lo + step)) for lo in range(0, rows, step)]


def _open_valid(path: Path, layout: TierLayout) -> int | None:
    """An fd of `path` when its size, header and trailer match `layout`; a torn or foreign file is removed."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        ok = (
            os.fstat(fd).st_size == layout.size
            and os.pread(fd, len(layout.header), 0) == layout.header
            and os.pread(fd, TRAILER_BYTES, layout.size - TRAILER_BYTES) == trailer(layout)
        )
    except OSError:
        ok = False
    if ok:
        return fd
    os.close(fd)
    path.unlink(missing_ok=True)  # torn (a crash before its data reached the disk) or another layout: rebuilt
    return None


def _pread_copy(fd: int, buffers: list[memoryview], offset: int) -> int:
    data = os.pread(fd, buffers[0].nbytes, offset)
    buffers[0][: len(data)] = data
    return len(data)


_preadv = getattr(os, "preadv", _pread_copy)


def _read_into(fd: int, buf: memoryview, offset: int) -> None:
    got = _preadv(fd, [buf], offset)
    if got != buf.nbytes:
        raise TornTierFile(f"short read: {got} of {buf.nbytes} bytes at {offset}")


def _age(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _write_all(fd: int, data: bytes | np.ndarray, offset: int) -> None:
    view = memoryview(data) if isinstance(data, bytes) else data.reshape(-1).view(np.uint8).data
    while len(view):
        n = os.pwrite(fd, view, offset)
        view, offset = view[n:], offset + n
