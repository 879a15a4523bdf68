"""FIFO eviction at episode granularity: at most N timesteps remain, the newest whole episodes, in FIFO order."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.errors import DataError
from amago_pipe.store import TrajectoryStore
from amago_pipe.store.eviction import _trim, evict
from amago_pipe.store.verify import verify_store
from amago_pipe.testing.episodes import example_specs, random_episode

BOX = example_specs()["box"]


def _one_big_segment(store: TrajectoryStore, lengths: list[int], first: int = 0) -> None:
    """One atomic writer (one segment), like the collect stage; episode i carries meta {"i": first + i}."""
    rng = np.random.default_rng(first)
    with store.writer("fifo", atomic=True) as w:
        for i, n in enumerate(lengths):
            w.add(random_episode(BOX, n, rng, meta={"i": first + i}))


def test_evicting_below_one_segment_keeps_its_newest_episodes(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    lengths = [int(n) for n in np.random.default_rng(0).integers(20, 80, size=130)]
    _one_big_segment(store, lengths)
    total = sum(lengths)
    removed = store.evict("fifo", 1000)
    kept = [e.meta["i"] for e in TrajectoryStore.open(store.url).iter_episodes("fifo")]
    remaining = sum(lengths[i] for i in kept)
    assert removed == total - remaining and 1000 - max(lengths) < remaining <= 1000
    assert kept == list(range(130 - len(kept), 130)), "not the newest episodes, in order"
    assert verify_store(store).ok and verify_store(store).findings == []


def test_trimmed_segment_keeps_its_place_in_fifo_order(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    _one_big_segment(store, [10] * 5, first=0)
    _one_big_segment(store, [10] * 5, first=5)
    assert store.evict("fifo", 70) == 30
    assert [e.meta["i"] for e in store.iter_episodes("fifo")] == [3, 4, 5, 6, 7, 8, 9]
    assert [s.timesteps for s in store.segments("fifo")] == [20, 50]
    _one_big_segment(store, [10] * 2, first=10)
    assert store.evict("fifo", 60) == 30  # the trimmed segment is still the oldest
    assert [e.meta["i"] for e in store.iter_episodes("fifo")] == [6, 7, 8, 9, 10, 11]


def test_an_episode_longer_than_the_limit_is_removed_whole(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    _one_big_segment(store, [50, 200])
    assert store.evict("fifo", 100) == 250
    assert store.partition_info("fifo").timesteps == 0 and store.segments("fifo") == []


def test_capacity_trims_a_large_atomic_write(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    store.configure_partition("fifo", capacity_timesteps=100)
    _one_big_segment(store, [30] * 10)
    info = store.partition_info("fifo")
    assert (info.timesteps, info.episodes) == (90, 3)
    assert [e.meta["i"] for e in TrajectoryStore.open(store.url).iter_episodes("fifo")] == [7, 8, 9]


def test_a_trim_that_lost_the_race_writes_nothing(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    _one_big_segment(store, [10] * 10)
    other = TrajectoryStore.open(store.url)
    stale = other.markers("fifo")[0]  # what a second evicting process listed before the first one trimmed
    assert store.evict("fifo", 55) == 50
    assert _trim(other.files, stale, 3) == 0
    reread = TrajectoryStore.open(store.url)
    assert reread.partition_info("fifo").timesteps == 50 and len(list(reread.iter_episodes("fifo"))) == 5
    assert verify_store(reread).findings == []  # the loser's unsealed copy was removed too


class _FirstListingStale:
    """StoreFiles whose first `markers()` answer is an older listing: a segment another writer sealed meanwhile
    is missing from it, as when two writers seal and evict at once."""

    def __init__(self, files, stale):
        self.files, self.stale = files, stale

    def markers(self, partition):
        stale, self.stale = self.stale, None
        return stale if stale is not None else self.files.markers(partition)

    def __getattr__(self, name):
        return getattr(self.files, name)


def test_eviction_goes_again_when_its_listing_was_stale(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    _one_big_segment(store, [10] * 5, first=0)
    _one_big_segment(store, [10] * 5, first=5)
    before = store.markers("fifo")
    _one_big_segment(store, [10] * 3, first=10)  # sealed by "another writer" after that listing
    assert evict(_FirstListingStale(store.files, before), "fifo", 60) == 70
    assert [e.meta["i"] for e in TrajectoryStore.open(store.url).iter_episodes("fifo")] == [7, 8, 9, 10, 11, 12]


def test_protected_refusal_names_the_cli_command(tmp_path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with store.writer("protected") as w:
        w.add(random_episode(BOX, 10, np.random.default_rng(0)))
    with pytest.raises(DataError, match=r"protected and never evicted.*`amago-pipe store copy SRC DST --partition"):
        store.evict("protected", 0)
