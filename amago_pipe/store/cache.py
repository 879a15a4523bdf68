"""`SegmentCache`: sealed segments decompressed into one arena of arrays, within a RAM byte budget;
`SpillCache`: the same arena in mapped files without a budget, for what does not fit the RAM one.

All resident segments share one array per field, so a batch of windows is one gather per field. Row 0 is
all zeros: padding positions of a window point at it. numpy only; must not import torch or click.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO

import numpy as np

from amago_pipe.store.format import FieldSpec

GROWTH = 1.5


class SegmentCache:
    """Places whole segments at row ranges of shared arena arrays (first fit, grown or compacted on demand).

    With uniform sampling every resident row is equally likely to be hit, so a segment once resident stays
    until it leaves the store; segments that do not fit the budget are read from zarr instead ("cold").
    """

    def __init__(self, fields: dict[str, FieldSpec], budget_bytes: int):
        self.fields = fields
        self.row_bytes = max(1, sum(f.row_bytes for f in fields.values()))
        self.max_rows = max(1, int(budget_bytes) // self.row_bytes)
        self.capacity = 1
        self.arrays: dict[str, np.ndarray] = {n: np.zeros((1, *f.shape), f.dtype) for n, f in fields.items()}
        self.placed: dict[str, tuple[int, int]] = {}
        """Segment key -> (first arena row, rows)."""
        self.version = 0
        """Bumped whenever a placement changes; row lookups must be redone."""

    @property
    def live_rows(self) -> int:
        return sum(n for _, n in self.placed.values())

    @property
    def nbytes(self) -> int:
        return self.capacity * self.row_bytes

    def row_of(self, key: str) -> int:
        """First arena row of a resident segment, -1 when it is not resident."""
        placed = self.placed.get(key)
        return placed[0] if placed else -1

    def forget(self, keep: set[str]) -> None:
        """Release segments no longer in the store (their rows become free space)."""
        gone = [k for k in self.placed if k not in keep]
        for k in gone:
            del self.placed[k]
        if gone:
            self.version += 1

    def admit(self, wanted: list[tuple[str, int]], load: Callable[[str], dict[str, np.ndarray] | None]) -> None:
        """Make resident, in order, the segments of `wanted` (key, rows) that fit the budget."""

        def fill(key: str, dest: dict[str, np.ndarray]) -> bool:
            data = load(key)
            if data is None:
                return False
            for name, arr in dest.items():
                arr[...] = data[name]
            return True

        self.admit_into(wanted, fill)

    def admit_into(self, wanted: list[tuple[str, int]], fill: Callable[[str, dict[str, np.ndarray]], bool]) -> None:
        """`admit`, with `fill(key, dest)` writing a segment's rows straight into its arena rows `dest` (one view per
        field), so loading needs no second copy of the segment; it returns False when the segment vanished."""
        missing = [(k, n) for k, n in wanted if k not in self.placed]
        if not missing:
            return
        free = self.max_rows - 1 - self.live_rows
        fitting = []
        for k, n in missing:
            if n <= free:
                fitting.append((k, n))
                free -= n
        target = 1 + self.live_rows + sum(n for _, n in fitting)
        if fitting and target > self.capacity and not self.placed:
            self._resize(min(self.max_rows, target))  # first fill: exact size, no slack
        for k, n in fitting:
            lo = self._allocate(n)
            if lo is None:
                continue
            if not fill(k, {name: arr[lo : lo + n] for name, arr in self.arrays.items()}):
                continue
            self.placed[k] = (lo, n)
            self.version += 1

    def _allocate(self, n: int) -> int | None:
        lo = self._first_fit(n)
        if lo is not None:
            return lo
        if 1 + self.live_rows + n > self.max_rows:
            return None
        end = max((a + b for a, b in self.placed.values()), default=1)
        wanted = min(self.max_rows, max(end + n, int(self.capacity * GROWTH)))
        if end + n <= wanted and wanted > self.capacity:
            self._resize(wanted)
        else:
            self._compact()
            if 1 + self.live_rows + n > self.capacity:
                self._resize(min(self.max_rows, max(1 + self.live_rows + n, int(self.capacity * GROWTH))))
        return self._first_fit(n)

    def _first_fit(self, n: int) -> int | None:
        cursor = 1
        for lo, size in sorted(self.placed.values()):
            if lo - cursor >= n:
                return cursor
            cursor = lo + size
        return cursor if self.capacity - cursor >= n else None

    def _resize(self, capacity: int) -> None:
        keep = min(self.capacity, capacity)
        for name, arr in self.arrays.items():
            grown = np.empty((capacity, *arr.shape[1:]), dtype=arr.dtype)
            grown[:keep] = arr[:keep]
            self.arrays[name] = grown
        self.capacity = capacity

    def _compact(self) -> None:
        """Slide resident segments down to close the gaps left by segments that left the store."""
        cursor = 1
        for key, (lo, n) in sorted(self.placed.items(), key=lambda kv: kv[1][0]):
            if lo != cursor:
                for arr in self.arrays.values():
                    arr[cursor : cursor + n] = arr[lo : lo + n]  # numpy copies overlapping ranges safely
                self.placed[key] = (cursor, n)
            cursor += n
        self.version += 1


class SpillCache(SegmentCache):
    """A `SegmentCache` without a budget whose arrays are mapped from nameless files in `folder` (O_TMPFILE: nothing
    is left behind by a crash). Its pages are page cache, which the kernel writes back and may reclaim under memory
    pressure (to read them again from disk), not the process's anonymous memory; they count in RssFile."""

    def __init__(self, fields: dict[str, FieldSpec], folder: Path):
        folder.mkdir(parents=True, exist_ok=True)
        self._files: dict[str, IO[bytes]] = {n: tempfile.TemporaryFile(dir=folder) for n in fields}  # noqa: SIM115
        self._maps: dict[str, mmap.mmap] = {}
        super().__init__(fields, budget_bytes=1 << 62)
        self._resize(1)

    def _resize(self, capacity: int) -> None:
        if not hasattr(self, "_files"):  # SegmentCache.__init__'s zero arrays, replaced at once by mapped ones
            return
        for name, f in self.fields.items():
            size = max(1, capacity * f.row_bytes)
            fd = self._files[name].fileno()
            if size > self._files[name].seek(0, 2):
                os.ftruncate(fd, size)  # the rows already written stay where they are: no copy
            self._maps[name] = mmap.mmap(fd, size)
            self.arrays[name] = np.frombuffer(self._maps[name], dtype=f.dtype, count=capacity * max(1, int(
                np.prod(f.shape, dtype=np.int64)))).reshape(capacity, *f.shape)  # fmt: skip
        self.capacity = capacity

    def close(self) -> None:
        """Release the files (their space goes back to the disk once no mapping is left)."""
        self.arrays = {}
        self._maps.clear()
        for file in self._files.values():
            file.close()

    def __del__(self) -> None:
        for file in getattr(self, "_files", {}).values():
            file.close()
