"""`ColdReader`: fills what the arenas do not hold of a batch's windows: big fields (images) from the disk tier
(tier.py), everything else from zarr (~1 ms a read).

Windows of segments not in RAM are served only while their seal marker exists (checked after the read), so an
evicted segment makes the sampler re-list and draw again. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any

import numpy as np

from amago_pipe.store.backend import LocalBackend
from amago_pipe.store.files import StoreFiles
from amago_pipe.store.format import marker_key
from amago_pipe.store.info import SegmentMarker, WindowBatch
from amago_pipe.store.reader import SegmentVanished, check_still_sealed, open_segment, read_rows
from amago_pipe.store.tier import DiskTier, TierFile, TornTierFile
from amago_pipe.store.windows import PartitionIndex

OPEN_SEGMENTS = 64


class ColdReader:
    """Reads windows of non-resident segments into a batch. Not thread-safe (one per sampler)."""

    def __init__(self, files: StoreFiles, tier: DiskTier | None):
        self.files = files
        self.tier = tier
        self._open: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._marker_paths: dict[str, str] = {}

    def forget(self, live: set[str]) -> None:
        """Drop what is kept open for segments no longer listed."""
        for key in [k for k in self._open if k not in live]:
            del self._open[key]
        for key in [k for k in self._marker_paths if k not in live]:
            del self._marker_paths[key]

    def fill(
        self,
        batch: WindowBatch,
        indexes: list[PartitionIndex],
        plan: dict[str, np.ndarray],
        cold: np.ndarray,
        seq_len: int,
        *,
        spilled: np.ndarray,
        big: tuple[str, ...],
    ) -> None:
        """Fill batch rows `cold` (windows not in RAM; what is not read here is zero so far): every field from zarr,
        or where `spilled` (n,) (their small fields came from the spill arena) the `big` fields only, from the
        disk tier or else zarr. Then check that each segment read is still sealed."""
        part, ep, start = plan["partition"][cold], plan["episode"][cold], plan["start"][cold]
        if len(indexes) == 1:
            segment, row = indexes[0].seg_of_ep[ep], indexes[0].row_in_seg[ep]
        else:
            segment, row = np.empty(len(cold), np.int64), np.empty(len(cold), np.int64)
            for p in np.unique(part).tolist():
                sel = part == p
                segment[sel], row[sel] = indexes[p].seg_of_ep[ep[sel]], indexes[p].row_in_seg[ep[sel]]
        if not big and spilled.all():  # the spill arena gave everything: only check the segments are still sealed
            for k in np.unique(part * (1 << 32) + segment).tolist():
                self._check_sealed(indexes[k >> 32].markers[k & 0xFFFFFFFF])
            return
        first = row + start  # (n,) segment row of each window's first observation
        n_obs = np.minimum(seq_len, plan["length"][cold] - start) + 1  # (n,) real observations of each window
        codes = (part * (1 << 32) + segment).tolist()
        keys = sorted(set(codes))
        slot = {k: g for g, k in enumerate(keys)}
        group = np.asarray([slot[c] for c in codes], dtype=np.int64)  # (n,) which of `keys` each window reads
        markers = [indexes[k >> 32].markers[k & 0xFFFFFFFF] for k in keys]
        if big and spilled.any():
            self._big_fields(batch, markers, group, spilled, cold, first, n_obs, seq_len, big)
        if not spilled.all():
            for g in np.unique(group[~spilled]).tolist():
                sel = np.flatnonzero((group == g) & ~spilled)
                self._from_zarr(batch, markers[g], cold[sel], first[sel], n_obs[sel], start[sel], seq_len)
        for marker in markers:
            self._check_sealed(marker)

    def _big_fields(
        self,
        batch: WindowBatch,
        markers: list[SegmentMarker],
        group: np.ndarray,
        spilled: np.ndarray,
        cold: np.ndarray,
        first: np.ndarray,
        n_obs: np.ndarray,
        seq_len: int,
        big: tuple[str, ...],
    ) -> None:
        """The big fields of the spilled windows: straight from tier files, else (no file) one zarr read each."""
        tier = self.tier
        used = np.unique(group[spilled]).tolist()
        handles: dict[int, TierFile | None] = {g: tier.handle(markers[g]) if tier is not None else None for g in used}
        on_tier = spilled & np.asarray([handles.get(g) is not None for g in group.tolist()])  # (n,)
        if tier is not None and on_tier.any():
            sel = np.flatnonzero(on_tier)
            tfs = [h for g in group[sel].tolist() if (h := handles[g]) is not None]
            try:
                tier.read_windows(batch, cold[sel], tfs, first[sel], n_obs[sel])
            except TornTierFile:  # a file changed under us: close it (checked again next time), read zarr now
                for g in np.unique(group[sel]).tolist():
                    tier.forget(_key(markers[g]))
                    handles[g] = None
        zeros = np.zeros(len(cold), np.int64)
        for g in used:
            if handles[g] is None:
                sel = np.flatnonzero((group == g) & spilled)
                self._from_zarr(batch, markers[g], cold[sel], first[sel], n_obs[sel], zeros[sel], seq_len, big)

    def _check_sealed(self, marker: SegmentMarker) -> None:
        """`check_still_sealed`, with one os.stat for a local store (this runs for every segment of every batch)."""
        if not isinstance(self.files.backend, LocalBackend):
            check_still_sealed(self.files, marker.info.partition, marker.info.id)
            return
        key = _key(marker)
        path = self._marker_paths.get(key)
        if path is None:
            path = self._marker_paths[key] = str(self.files.backend.root / marker_key(*key.split("/", 1)))
        if not os.access(path, os.F_OK):
            raise SegmentVanished(key)

    def _from_zarr(
        self,
        batch: WindowBatch,
        marker: SegmentMarker,
        windows: np.ndarray,
        first: np.ndarray,
        n_obs: np.ndarray,
        start: np.ndarray,
        seq_len: int,
        only: tuple[str, ...] | None = None,
    ) -> None:
        """One orthogonal zarr read per field (of `only`, default all) of the rows the windows of one segment need."""
        has_prev = (start > 0).astype(np.int64)
        pieces = [np.arange(f - h, f + k) for f, h, k in zip(first.tolist(), has_prev.tolist(), n_obs.tolist())]
        arrays = self._arrays(marker)
        if only is not None:
            arrays = {n: arrays[n] for n in only}
        data = read_rows(self.files, marker, arrays, np.concatenate(pieces))
        cursor = 0
        for b, h, k in zip(windows.tolist(), has_prev.tolist(), n_obs.tolist()):
            if h:
                batch.prev_actions[b] = data["actions"][cursor]
                batch.prev_rewards[b] = data["rewards"][cursor]
            o = cursor + h
            n_steps = min(k, seq_len)
            for name, value in data.items():
                if name.startswith("obs/"):
                    batch.obs[name[4:]][b, :k] = value[o : o + k]
                elif name.startswith("goals/"):
                    batch.goals[name[6:]][b, :k] = value[o : o + k]
                else:
                    getattr(batch, name)[b, :n_steps] = value[o : o + n_steps]
            cursor = o + k

    def _arrays(self, marker: SegmentMarker) -> dict[str, Any]:
        """The arrays of a cold segment, opened (and checked) once while it stays among the OPEN_SEGMENTS."""
        key = _key(marker)
        if key in self._open:
            self._open.move_to_end(key)
            return self._open[key]
        _, arrays = open_segment(self.files, marker)
        self._open[key] = arrays
        if len(self._open) > OPEN_SEGMENTS:
            self._open.popitem(last=False)
        return arrays


def _key(marker: SegmentMarker) -> str:
    return f"{marker.info.partition}/{marker.info.id}"
