"""`verify_store`: damaged segments are found and quarantined, dead writers' leftovers cleaned, live ones kept."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.store import TrajectoryStore
from amago_pipe.store.segments import SegmentBuilder, episode_rows
from amago_pipe.store.verify import verify_store
from amago_pipe.testing.episodes import example_specs, random_episode

BOX = example_specs()["box"]


def _store(tmp_path: Path, segments: int = 3) -> TrajectoryStore:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(0)
    for _ in range(segments):
        with store.writer("protected") as w:
            w.add(random_episode(BOX, 20, rng))
    return store


def _segment_dir(store: TrajectoryStore, index: int) -> Path:
    sid = store.segments("protected")[index].id
    return Path(store.url) / "partitions" / "protected" / "segments" / sid


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_clean_store_verifies(tmp_path: Path) -> None:
    report = verify_store(_store(tmp_path))
    assert report.ok and report.segments == 3 and report.episodes == 3 and report.timesteps == 60
    assert report.findings == []


@pytest.mark.parametrize(
    ("damage", "detail"),
    [
        ("delete_chunk", "array 'rewards' has 0 of 1 chunks"),
        ("corrupt_chunk", "array 'rewards' fails to decode"),
        ("truncate_marker", "seal marker: .*unreadable seal marker"),
        ("delete_array", "array 'actions' missing"),
        ("wipe_attributes", r"segment metadata \(zarr.json attributes\) lost its row count or episode table"),
    ],
)
def test_damage_is_found_and_quarantined(tmp_path: Path, damage: str, detail: str) -> None:
    store = _store(tmp_path)
    seg = _segment_dir(store, 1)
    sid = seg.name
    marker = Path(store.url) / "partitions" / "protected" / "sealed" / f"{sid}.json"
    if damage == "delete_chunk":
        (seg / "rewards" / "c.0").unlink()
    elif damage == "corrupt_chunk":
        (seg / "rewards" / "c.0").write_bytes(b"\x02garbage-not-blosc")
    elif damage == "truncate_marker":
        marker.write_text(marker.read_text()[:40])
    elif damage == "wipe_attributes":
        doc = json.loads((seg / "zarr.json").read_text())
        (seg / "zarr.json").write_text(json.dumps({**doc, "attributes": {}}))
    else:
        import shutil

        shutil.rmtree(seg / "actions")
    report = verify_store(store)
    assert not report.ok and [f.segment for f in report.damaged] == [sid]
    assert re.search(detail, report.damaged[0].detail), report.damaged[0].detail
    fixed = verify_store(store, quarantine=True)
    assert fixed.ok and fixed.damaged[0].action == "quarantined"
    assert (Path(store.url) / "quarantine" / "protected" / sid).is_dir() and not marker.exists()
    after = verify_store(TrajectoryStore.open(store.url))
    assert after.ok and after.segments == 2 and after.findings == []
    assert len(list(TrajectoryStore.open(store.url).iter_episodes("protected"))) == 2


def test_unsealed_segments_of_dead_writers_are_reported_and_removed(tmp_path: Path) -> None:
    store = _store(tmp_path, segments=1)
    live = SegmentBuilder(store.files, "protected")
    ep = random_episode(BOX, 5, np.random.default_rng(1))
    live.add_rows(episode_rows(ep, store.fields), length=5, time_start=0, total_return=ep.total_return)
    dead = SegmentBuilder(store.files, "protected")
    meta_path = Path(store.url) / "partitions" / "protected" / "segments" / dead.id / "zarr.json"
    doc = json.loads(meta_path.read_text())
    doc["attributes"]["writer"]["pid"] = _dead_pid()
    meta_path.write_text(json.dumps(doc))
    report = verify_store(store)
    assert report.ok and report.segments == 1
    statuses = {f.segment: f.status for f in report.findings}
    assert statuses == {live.id: "in-progress", dead.id: "abandoned"}
    cleaned = verify_store(store, quarantine=True)
    assert {f.segment: f.action for f in cleaned.findings} == {live.id: "", dead.id: "removed"}
    assert not (meta_path.parent).exists()
    live.seal()
    assert verify_store(store).findings == [] and len(store.segments("protected")) == 2


def test_old_temporary_marker_files_are_stray(tmp_path: Path) -> None:
    store = _store(tmp_path, segments=1)
    tmp = Path(store.url) / "partitions" / "protected" / "sealed" / ".tmp-dead-x.json"
    tmp.write_text("{")
    assert verify_store(store).findings == []  # fresh: a writer may be sealing right now
    old = time.time() - 7200
    os.utime(tmp, (old, old))
    report = verify_store(store, quarantine=True)
    assert [(f.status, f.action) for f in report.findings] == [("stray", "removed")] and not tmp.exists()
