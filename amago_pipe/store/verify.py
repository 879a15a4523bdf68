"""`verify_store`: check every sealed segment, find unsealed leftovers of dead writers, optionally quarantine.

A sealed segment is damaged when its marker is unreadable, its metadata lost the episode table, an array is
missing, of the wrong shape or dtype, has missing chunks, fails to decompress or to match its checksum, or its
rewards disagree with the marker's returns.
numpy + zarr only; must not import torch or click.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from amago_pipe.errors import StoreFormatError
from amago_pipe.store.format import marker_key, quarantine_key, sealed_key, segment_key
from amago_pipe.store.info import SegmentMarker
from amago_pipe.store.leftovers import unsealed_segments, writer_state
from amago_pipe.store.reader import decode_problem, segment_problem

if TYPE_CHECKING:
    from amago_pipe.store.zarr_store import TrajectoryStore

STALE_TEMP_SECONDS = 3600.0
"""Temporary marker files older than this are leftovers of a writer killed while sealing."""


@dataclass
class Finding:
    """One thing `verify` noticed about a segment (or a stray file)."""

    partition: str
    segment: str
    status: str
    """damaged | abandoned (unsealed, writer dead) | in-progress (unsealed, writer alive) | stray (temp file)."""
    detail: str
    action: str = ""
    """What --quarantine did: 'quarantined', 'removed', or ''."""


@dataclass
class VerifyReport:
    """Outcome of `verify_store`; `ok` is False while damaged segments remain visible."""

    url: str
    segments: int = 0
    episodes: int = 0
    timesteps: int = 0
    findings: list[Finding] = field(default_factory=list)

    @property
    def damaged(self) -> list[Finding]:
        return [f for f in self.findings if f.status == "damaged"]

    @property
    def ok(self) -> bool:
        return all(f.action == "quarantined" for f in self.damaged)

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "ok": self.ok,
            "segments": self.segments,
            "episodes": self.episodes,
            "timesteps": self.timesteps,
            "findings": [f.__dict__ for f in self.findings],
        }


def verify_store(store: TrajectoryStore, *, quarantine: bool = False, deep: bool = True) -> VerifyReport:
    """Check every segment of every partition; with `quarantine`, move damaged segments to `quarantine/`
    and delete unsealed segments whose writer is dead. `deep` decompresses every chunk."""
    report = VerifyReport(store.url)
    for partition in store.partitions():
        _verify_sealed(store, partition, report, quarantine=quarantine, deep=deep)
        _find_unsealed(store, partition, report, clean=quarantine)
    return report


def _verify_sealed(
    store: TrajectoryStore, partition: str, report: VerifyReport, *, quarantine: bool, deep: bool
) -> None:
    for name in store.backend.list_dir(sealed_key(partition)):
        if name.startswith("."):
            _stray(store, partition, name, report, clean=quarantine)
            continue
        if not name.endswith(".json"):
            continue
        sid = name[:-5]
        problem, marker = _check_segment(store, partition, sid, deep=deep)
        if problem is None and marker is not None:
            report.segments += 1
            report.episodes += marker.info.episodes
            report.timesteps += marker.info.timesteps
            continue
        if not store.backend.exists(marker_key(partition, sid)):
            continue  # evicted or dropped while we read it: gone, not damaged
        finding = Finding(partition, sid, "damaged", problem or "unknown problem")
        if quarantine:
            _quarantine(store, partition, sid, finding)
        report.findings.append(finding)


def _check_segment(
    store: TrajectoryStore, partition: str, sid: str, *, deep: bool
) -> tuple[str | None, SegmentMarker | None]:
    """(problem or None, marker). Never raises for damage; returns a description instead."""
    raw = store.backend.read_bytes(marker_key(partition, sid))
    if raw is None:
        return None, None  # dropped while we looked: not damage
    try:
        marker = SegmentMarker.from_json(raw, marker_key(partition, sid))
    except StoreFormatError as e:
        return f"seal marker: {e}", None
    problem, _, arrays = segment_problem(store.files, marker)
    if problem is not None or not deep:
        return problem, marker
    for name, arr in arrays.items():
        problem = _read_all(arr, name)
        if problem:
            return problem, marker
    rewards = np.asarray(arrays["rewards"][:], dtype=np.float32)
    ends = np.cumsum(marker.lengths + 1)
    sums = np.asarray([np.sum(r[:-1], dtype=np.float64) for r in np.split(rewards, ends[:-1])])
    if len(sums) != len(marker.returns) or not np.array_equal(sums, marker.returns):
        return "rewards disagree with the episode returns in the seal marker", marker
    return None, marker


def _read_all(arr: Any, name: str) -> str | None:
    chunk = arr.chunks[0]
    try:
        for lo in range(0, arr.shape[0], chunk * 16):
            arr[lo : lo + chunk * 16]
    except Exception as e:
        return decode_problem(name, e)
    return None


def _quarantine(store: TrajectoryStore, partition: str, sid: str, finding: Finding) -> None:
    """Hide the segment (marker first), then move its data and marker under quarantine/."""
    raw = store.backend.read_bytes(marker_key(partition, sid))
    store.backend.delete(marker_key(partition, sid))
    target = quarantine_key(partition, sid)
    if store.backend.exists(segment_key(partition, sid)):
        store.backend.move(segment_key(partition, sid), target)
    note = {"reason": finding.detail, "time": time.time(), "marker": raw.decode(errors="replace") if raw else None}
    store.backend.write_atomic(f"{target}.quarantine.json", json.dumps(note).encode())
    finding.action = "quarantined"


def _find_unsealed(store: TrajectoryStore, partition: str, report: VerifyReport, *, clean: bool) -> None:
    for sid in unsealed_segments(store.files, partition):
        state, who = writer_state(store.files, partition, sid, id_pid_is_local=True)
        if state != "dead":
            detail = f"writer {who} is running" if state == "alive" else f"writer {who}"
            report.findings.append(Finding(partition, sid, "in-progress", f"unsealed; {detail}"))
            continue
        finding = Finding(partition, sid, "abandoned", f"unsealed; writer {who} is gone (ignored by readers)")
        if clean:
            store.backend.delete(segment_key(partition, sid))
            finding.action = "removed"
        report.findings.append(finding)


def _stray(store: TrajectoryStore, partition: str, name: str, report: VerifyReport, *, clean: bool) -> None:
    key = f"{sealed_key(partition)}/{name}"
    mtime = store.backend.mtime(key)
    if mtime is not None and time.time() - mtime < STALE_TEMP_SECONDS:
        return  # a writer may be sealing right now
    finding = Finding(partition, name, "stray", "temporary marker file left by a writer killed while sealing")
    if clean:
        store.backend.delete(key)
        finding.action = "removed"
    report.findings.append(finding)
