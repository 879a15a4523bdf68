"""Reads of damaged sealed segments fail with one DataError naming the segment and the fix, never zeros.

Every way of reading is covered (load into the RAM cache, cold window reads, iter_episodes, copy), for a
deleted chunk, a flipped bit, and segment metadata whose attributes were wiped.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.errors import DataError
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.tools import copy_store, describe_store
from amago_pipe.store.verify import verify_store
from amago_pipe.testing.episodes import example_specs, random_episode

BOX = example_specs()["box"]


def _store(tmp_path: Path) -> tuple[TrajectoryStore, Path]:
    """Three one-episode segments; returns the store and the folder of the middle segment."""
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(0)
    for _ in range(3):
        with store.writer("protected") as w:
            w.add(random_episode(BOX, 20, rng))
    sid = store.segments("protected")[1].id
    return store, tmp_path / "s.zarr" / "partitions" / "protected" / "segments" / sid


def _damage(segment: Path, how: str) -> None:
    if how == "missing_chunk":
        (segment / "rewards" / "c.0").unlink()
    elif how == "bit_flip":
        chunk = segment / "obs" / "observation" / "c.0.0"
        data = bytearray(chunk.read_bytes())
        data[len(data) // 2] ^= 0x10
        chunk.write_bytes(bytes(data))
    else:  # the group's attributes (episode table, row count) replaced by {}
        meta = segment / "zarr.json"
        doc = json.loads(meta.read_text())
        doc["attributes"] = {}
        meta.write_text(json.dumps(doc))


def _message(segment: Path) -> str:
    return rf"segment protected/{segment.name} is damaged: .*amago-pipe store verify .* --quarantine"


DAMAGE = ["missing_chunk", "bit_flip", "wiped_attributes"]


@pytest.mark.parametrize("how", DAMAGE)
def test_sampling_from_ram_refuses_a_damaged_segment(tmp_path: Path, how: str) -> None:
    store, segment = _store(tmp_path)
    _damage(segment, how)
    reader = TrajectoryStore.open(store.url)
    with pytest.raises(DataError, match=_message(segment)):
        reader.sample(8, 4, rng=np.random.default_rng(0))


@pytest.mark.parametrize("how", DAMAGE)
def test_cold_window_reads_refuse_a_damaged_segment(tmp_path: Path, how: str) -> None:
    store, segment = _store(tmp_path)
    _damage(segment, how)
    cold = TrajectoryStore.open(store.url, cache_bytes=0)  # nothing fits the cache: every window is read from zarr
    with pytest.raises(DataError, match=_message(segment)):
        _sample_20_batches(cold)


def _sample_20_batches(store: TrajectoryStore) -> None:
    for seed in range(20):
        store.sample(8, 4, rng=np.random.default_rng(seed))


@pytest.mark.parametrize("how", DAMAGE)
def test_iter_episodes_and_copy_refuse_a_damaged_segment(tmp_path: Path, how: str) -> None:
    store, segment = _store(tmp_path)
    _damage(segment, how)
    with pytest.raises(DataError, match=_message(segment)):
        list(TrajectoryStore.open(store.url).iter_episodes("protected"))
    with pytest.raises(DataError, match=_message(segment)):
        copy_store(TrajectoryStore.open(store.url), tmp_path / "copy.zarr")
    copied = TrajectoryStore.open(tmp_path / "copy.zarr")
    assert len(copied.segments("protected")) == 1 and verify_store(copied).ok  # the segment before, whole


@pytest.mark.parametrize("how", DAMAGE)
def test_verify_finds_it_and_quarantine_makes_reads_work_again(tmp_path: Path, how: str) -> None:
    store, segment = _store(tmp_path)
    _damage(segment, how)
    report = verify_store(store, deep=how == "bit_flip")  # a flipped bit needs the data read
    assert [f.segment for f in report.damaged] == [segment.name]
    described = describe_store(TrajectoryStore.open(store.url))
    if how != "bit_flip":
        assert not described["ok"] and described["findings"][0]["segment"] == segment.name
    verify_store(store, quarantine=True)
    reader = TrajectoryStore.open(store.url)
    assert len(list(reader.iter_episodes("protected"))) == 2
    assert reader.sample(8, 4, rng=np.random.default_rng(0)).mask.any()


def test_a_clean_store_reads_back_exactly(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(1)
    episodes = [random_episode(BOX, 30, rng) for _ in range(4)]
    with store.writer("protected") as w:
        for ep in episodes:
            w.add(ep)
    back = list(TrajectoryStore.open(store.url).iter_episodes("protected"))
    for a, b in zip(episodes, back, strict=True):
        assert np.array_equal(a.obs["observation"], b.obs["observation"]) and np.array_equal(a.rewards, b.rewards)
    assert describe_store(store)["ok"] and describe_store(store)["findings"] == []
