"""Store maintenance behind `amago-pipe store ...`: describe (inspect), histograms, copy between stores; the
fingerprint of the segments one writer wrote.

`verify_store` lives in verify.py. numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.store.info import SegmentInfo, SegmentMarker
from amago_pipe.store.reader import SegmentVanished, open_segment, read_rows
from amago_pipe.store.segments import SegmentBuilder
from amago_pipe.store.zarr_store import TrajectoryStore

HISTOGRAM_BINS = 10


def return_histogram(returns: np.ndarray, bins: int = HISTOGRAM_BINS) -> dict[str, list[float] | list[int]]:
    """Equal-width histogram of episode returns: {"edges": [bins+1], "counts": [bins]}."""
    finite = returns[np.isfinite(returns)]
    if not len(finite):
        return {"edges": [], "counts": []}
    lo, hi = float(finite.min()), float(finite.max())
    if lo == hi:
        lo, hi = lo - 0.5, hi + 0.5
    counts, edges = np.histogram(finite, bins=bins, range=(lo, hi))
    return {"edges": [float(e) for e in edges], "counts": [int(c) for c in counts]}


def describe_store(store: TrajectoryStore) -> dict[str, Any]:
    """Everything `store inspect` shows, as JSON-able data: format, spec, partitions, return histograms, and
    the findings of a fast `verify` (damaged segments, unsealed ones of dead or running writers)."""
    from amago_pipe.store.verify import verify_store

    checked = verify_store(store, deep=False)
    damaged = {(f.partition, f.segment) for f in checked.findings if f.status == "damaged"}
    partitions: dict[str, Any] = {}
    for name in store.partitions():
        info = store.partition_info(name).to_json()
        markers = store.markers(name)
        returns = np.concatenate([m.returns for m in markers]) if markers else np.zeros(0)
        info["return_histogram"] = return_histogram(returns)
        lengths = np.concatenate([m.lengths for m in markers]) if markers else np.zeros(0, np.int64)
        info["length_min"] = int(lengths.min()) if len(lengths) else None
        info["length_mean"] = float(lengths.mean()) if len(lengths) else None
        info["length_max"] = int(lengths.max()) if len(lengths) else None
        info["ends"] = episode_ends(store, [m for m in markers if (name, m.info.id) not in damaged])
        info["oldest_segment"] = markers[0].info.created if markers else None
        info["newest_segment"] = markers[-1].info.created if markers else None
        partitions[name] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in info.items()}
    totals = {k: sum(p[k] for p in partitions.values()) for k in ("segments", "episodes", "timesteps", "bytes")}
    return {
        "url": store.url,
        "format_version": store.format_version,
        "codec": store.codec,
        "created": store.info.get("created", {}),
        "spec": store.spec.to_json(),
        "fingerprint": store.fingerprint(),
        "partitions": partitions,
        "total": totals,
        "ok": checked.ok,
        "findings": [f.__dict__ for f in checked.findings],
    }


def episode_ends(store: TrajectoryStore, markers: list[SegmentMarker]) -> dict[str, int]:
    """How the episodes of `markers` end: `terminated` (a terminal state), `truncated` (a time limit) or
    `open` (neither: a piece of a longer episode, or a dataset that marks no end). Reads two flags per episode;
    segments evicted meanwhile are skipped."""
    ends = {"terminated": 0, "truncated": 0, "open": 0}
    for marker in markers:
        last = marker.row_offsets + marker.lengths - 1  # (E,) the row of each episode's final step
        try:
            _, arrays = open_segment(store.files, marker)
            flags = read_rows(store.files, marker, {k: arrays[k] for k in ("terminated", "truncated")}, last)
        except (SegmentVanished, DataError):  # evicted meanwhile, or damaged: `findings` reports the latter
            continue
        terminated, truncated = flags["terminated"], flags["truncated"] & ~flags["terminated"]
        ends["terminated"] += int(terminated.sum())
        ends["truncated"] += int(truncated.sum())
        ends["open"] += int((~(terminated | truncated)).sum())
    return ends


def histogram_lines(hist: dict[str, Any], width: int = 30) -> list[str]:
    """Text bars of a return histogram, one line per bin: `[  -1.5,    2.0)  ████  12`."""
    counts, edges = hist.get("counts") or [], hist.get("edges") or []
    top = max(counts, default=0)
    lines = []
    for i, c in enumerate(counts):
        bar = "█" * (round(width * c / top) if top else 0)
        lines.append(f"[{edges[i]:>10.4g}, {edges[i + 1]:>10.4g})  {bar:<{width}}  {c}")
    return lines


@dataclass
class CopyReport:
    """What `copy_store` did, per partition."""

    copied: dict[str, int] = field(default_factory=dict)
    """Segments copied by partition."""
    skipped: dict[str, int] = field(default_factory=dict)
    """Segments already present in the destination (same id), by partition."""
    timesteps: int = 0


def copy_store(src: TrajectoryStore, dst_url: str | Path, partitions: list[str] | None = None) -> CopyReport:
    """Copy sealed segments (all partitions or the named ones) into `dst_url`, created with the source spec
    if missing. Segment ids are kept, so copying again only adds what is new."""
    names = partitions or src.partitions()
    known = src.partitions()
    for name in names:
        if name not in known:
            raise DataError(f"copy: no partition '{name}' in {src.url} (partitions: {', '.join(known) or 'none'})")
    dst = TrajectoryStore.create(dst_url, src.spec, exist_ok=True, codec=src.codec)
    if dst.url == src.url:
        raise DataError(f"copy: source and destination are the same store ({src.url})")
    report = CopyReport()
    for name in names:
        if name not in dst.partitions():
            kind, capacity = src.partition_config(name)
            dst.configure_partition(name, kind=kind, capacity_timesteps=capacity)
        present = {s.id for s in dst.segments(name)}
        report.copied[name], report.skipped[name] = 0, 0
        for marker in src.markers(name):
            if marker.info.id in present:
                report.skipped[name] += 1
                continue
            try:
                _copy_segment(src, dst, marker)
            except SegmentVanished:
                continue
            report.copied[name] += 1
            report.timesteps += marker.info.timesteps
    return report


def _copy_segment(src: TrajectoryStore, dst: TrajectoryStore, marker: SegmentMarker) -> None:
    """Re-encode one segment into `dst` under the same id."""
    info = marker.info
    builder = SegmentBuilder(dst.files, info.partition, segment_id=info.id, expected_rows=info.rows, attrs=info.attrs)
    try:
        builder.add_segment(src.files, marker)
        sealed = builder.seal()
    except BaseException:
        builder.abort()
        raise
    dst.segment_sealed(sealed)


def written_by(store: TrajectoryStore, partition: str, attr: str, value: str) -> str:
    """Hash of the sealed segments of `partition` whose attribute `attr` is `value` ('missing' when none).
    Segments are immutable, so their ids name the data; other writers' appends do not change the hash."""
    if partition not in store.partitions():
        return "missing"
    return segments_digest(store, [s for s in store.segments(partition) if s.attrs.get(attr) == value])


def segments_digest(store: TrajectoryStore, segments: list[SegmentInfo]) -> str:
    """Hash of the store's spec and these sealed segments' ids and sizes ('missing' when there are none)."""
    if not segments:
        return "missing"
    digest = hashlib.sha256(json.dumps(store.spec.to_json(), sort_keys=True).encode())
    for s in segments:
        digest.update(f"{s.id}:{s.rows}\n".encode())
    return digest.hexdigest()[:20]
