"""Creating and opening stores safely, and what writers leave behind: unusable specs and paths are refused
before anything is written, dead writers' unsealed segments are reclaimed by the next write (only those),
and a failed first write removes the store it created only while nobody else wrote to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.errors import DataError, StoreFormatError
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.leftovers import discard_if_unused, reclaim_abandoned
from amago_pipe.store.segments import SegmentBuilder
from amago_pipe.store.tools import describe_store
from amago_pipe.testing.episodes import example_specs, random_episode

BOX = example_specs()["box"]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _set_writer(store: TrajectoryStore, sid: str, **writer: object) -> None:
    meta = Path(store.url) / "partitions" / "fifo" / "segments" / sid / "zarr.json"
    doc = json.loads(meta.read_text())
    doc["attributes"]["writer"].update(writer)
    meta.write_text(json.dumps(doc))


def test_byte_string_observations_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    spec = DataSpec({"observation": ArraySpec((1,), "bytes8")}, ActionSpec("discrete", (), n=2))
    with pytest.raises(DataError, match=r"observations\['observation'\]: dtype .* is not a numpy dtype"):
        TrajectoryStore.create(tmp_path / "s.zarr", spec)
    spec = DataSpec({"observation": ArraySpec((1,), "S1")}, ActionSpec("discrete", (), n=2))
    with pytest.raises(DataError, match=r"dtype \|S1 \(byte strings\) cannot be stored"):
        TrajectoryStore.create(tmp_path / "s.zarr", spec)
    assert not (tmp_path / "s.zarr").exists()


def test_a_store_left_with_an_unusable_or_missing_spec_is_one_clear_error(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    root = Path(store.url) / "zarr.json"
    doc = json.loads(root.read_text())
    doc["attributes"]["amago_pipe_store"]["spec"]["observations"]["observation"]["dtype"] = "bytes8"
    root.write_text(json.dumps(doc))
    with pytest.raises(StoreFormatError, match=r"zarr.json: the stored data spec is unusable .*into a new store"):
        TrajectoryStore.open(store.url)
    del doc["attributes"]["amago_pipe_store"]["spec"]
    root.write_text(json.dumps(doc))
    with pytest.raises(StoreFormatError, match=r"zarr.json: root attribute 'amago_pipe_store' has no data spec"):
        TrajectoryStore.open(store.url)
    with pytest.raises(StoreFormatError, match="has no data spec"):
        TrajectoryStore.create(store.url, BOX, exist_ok=True)


def test_a_regular_file_is_not_a_store(tmp_path: Path) -> None:
    path = tmp_path / "file.zarr"
    path.write_text("keep me")
    for call in (lambda: TrajectoryStore.open(path), lambda: TrajectoryStore.create(path, BOX, exist_ok=True)):
        with pytest.raises(StoreFormatError, match="is a regular file, not a trajectory store"):
            call()
    assert path.read_text() == "keep me"


def test_of_two_creations_exactly_one_creates(tmp_path: Path) -> None:
    first = TrajectoryStore.create(tmp_path / "s.zarr", BOX, exist_ok=True)
    second = TrajectoryStore.create(tmp_path / "s.zarr", BOX, exist_ok=True)
    assert first.created and not second.created and not TrajectoryStore.open(first.url).created
    with pytest.raises(StoreFormatError, match="a store already exists here"):
        TrajectoryStore.create(tmp_path / "s.zarr", BOX)


def test_next_write_reclaims_dead_writers_leftovers_only(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    dead, live, remote = (SegmentBuilder(store.files, "fifo") for _ in range(3))
    _set_writer(store, dead.id, pid=_dead_pid())
    _set_writer(store, remote.id, pid=_dead_pid(), host="another-host")
    findings = {f["segment"]: f["status"] for f in describe_store(store)["findings"]}
    assert findings == {dead.id: "abandoned", live.id: "in-progress", remote.id: "in-progress"}
    with store.writer("fifo") as w:
        w.add(random_episode(BOX, 5, np.random.default_rng(0)))
    segments = Path(store.url) / "partitions" / "fifo" / "segments"
    assert not (segments / dead.id).exists() and (segments / live.id).is_dir() and (segments / remote.id).is_dir()
    assert reclaim_abandoned(store.files, "fifo") == []


def test_discard_removes_only_an_unused_store(tmp_path: Path) -> None:
    unused = TrajectoryStore.create(tmp_path / "a.zarr", BOX)
    unused.configure_partition("fifo", capacity_timesteps=10)
    builder = SegmentBuilder(unused.files, "fifo")
    builder.abort()
    assert discard_if_unused(unused.files) and not (tmp_path / "a.zarr").exists()

    used = TrajectoryStore.create(tmp_path / "b.zarr", BOX)
    in_progress = SegmentBuilder(TrajectoryStore.open(used.url).files, "protected")  # another writer, not sealed yet
    assert not discard_if_unused(used.files)
    in_progress.add_rows(
        {n: np.zeros((6, *f.shape), f.dtype) for n, f in used.fields.items()}, length=5, time_start=0, total_return=0.0
    )
    in_progress.seal()
    assert [s.episodes for s in TrajectoryStore.open(used.url).segments("protected")] == [1]


def test_sealing_into_a_removed_store_fails_and_commits_nothing(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    removed = "the store was removed while segment .* nothing was committed"
    writer = store.writer("protected", atomic=True)
    writer.add(random_episode(BOX, 5, np.random.default_rng(0)))
    (tmp_path / "s.zarr" / "zarr.json").unlink()
    with pytest.raises(StoreFormatError, match=removed):
        writer.close()
    partition = tmp_path / "s.zarr" / "partitions" / "protected"
    assert not list(partition.glob("sealed/*.json")) and not [p for p in partition.glob("segments/*") if p.is_dir()]
