"""`StoreFiles`: what the store's parts share below the facade: where the store lives, what a segment holds,
which segments are sealed.

`TrajectoryStore` (zarr_store.py) composes one and hands it to the reader, segment writers, the sampler,
eviction and leftovers, which never see the facade. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

from amago_pipe.spec import DataSpec
from amago_pipe.store.backend import Backend
from amago_pipe.store.format import (
    PARTITIONS,
    FieldSpec,
    marker_key,
    partition_key,
    sealed_key,
    segment_fields,
    segment_key,
)
from amago_pipe.store.info import SegmentMarker


class StoreFiles:
    """One store's backend, URL, spec, codec and segment fields, plus its sealed-segment listing (cached)."""

    def __init__(self, backend: Backend, spec: DataSpec, codec: str):
        self.backend = backend
        self.url = backend.url
        self.spec = spec
        self.codec = codec
        self.fields: dict[str, FieldSpec] = segment_fields(spec)
        self.version = 0
        """Bumped whenever a segment is sealed, dropped or replaced through this object (samplers re-list)."""
        self._markers: dict[str, dict[str, SegmentMarker]] = {}

    def partitions(self) -> list[str]:
        """Names of the partitions, sorted."""
        return [
            n
            for n in self.backend.list_dir(PARTITIONS)
            if not n.startswith((".", "_")) and self.backend.exists(f"{partition_key(n)}/zarr.json")
        ]

    def markers(self, partition: str) -> list[SegmentMarker]:
        """Sealed segments, oldest first; markers are immutable, so each is parsed once."""
        cached = self._markers.setdefault(partition, {})
        names = [
            n[:-5]
            for n in self.backend.list_dir(sealed_key(partition))
            if n.endswith(".json") and not n.startswith(".")
        ]
        present = set(names)
        for sid in [s for s in cached if s not in present]:
            del cached[sid]
        for sid in names:
            if sid not in cached:
                raw = self.backend.read_bytes(marker_key(partition, sid))
                if raw is None:  # dropped between listing and reading
                    continue
                cached[sid] = SegmentMarker.from_json(raw, f"{self.url}/{marker_key(partition, sid)}")
        return [cached[s] for s in sorted(cached)]

    def sealed(self, marker: SegmentMarker) -> None:
        """Record a segment sealed through this object."""
        self._markers.setdefault(marker.info.partition, {})[marker.info.id] = marker
        self.version += 1

    def replaced(self, old_id: str, marker: SegmentMarker) -> None:
        """Record that segment `old_id` was rewritten as `marker` (its files are already gone)."""
        cached = self._markers.setdefault(marker.info.partition, {})
        cached.pop(old_id, None)
        cached[marker.info.id] = marker
        self.version += 1

    def drop(self, partition: str, segment_ids: list[str]) -> None:
        """Remove sealed segments, marker first (readers stop seeing them before any data goes); ids already
        gone are skipped."""
        for sid in segment_ids:
            self.backend.delete(marker_key(partition, sid))
            self.backend.delete(segment_key(partition, sid))
            self._markers.get(partition, {}).pop(sid, None)
        self.version += 1
