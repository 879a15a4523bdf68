"""Segments beyond the RAM budget: spill arena and disk-tier files give the windows RAM gives, torn or half-built
tier files are never used, a budget smaller than a segment warns with the size it needs."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.errors import DataError
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import TrajectoryStore, WindowBatch
from amago_pipe.store.sampler import CacheBudgetWarning
from amago_pipe.store.tier import TRAILER_BYTES, TierWarning
from amago_pipe.testing.episodes import random_episode

SPEC = DataSpec(
    {"pixels": ArraySpec((16, 16, 4), "uint8"), "state": ArraySpec((3,), "float32")},  # 1,024 B pixels: tier files
    ActionSpec("discrete", (), n=4),
    goals={"goal_image": ArraySpec((16, 16, 4), "uint8"), "desired_goal": ArraySpec((2,), "float32")},
)
LENGTHS = [5, 40, 130, 7, 64, 90, 3, 55]


def _store(tmp_path: Path) -> Path:
    url = tmp_path / "s.zarr"
    store = TrajectoryStore.create(url, SPEC)
    rng = np.random.default_rng(0)
    for partition, lengths in (("protected", LENGTHS), ("fifo", LENGTHS[:3])):
        with store.writer(partition, segment_timesteps=60) as w:
            for n in lengths:
                w.add(random_episode(SPEC, n, rng))
    return url


def _batches(store: TrajectoryStore) -> list[WindowBatch]:
    mix = {"protected": 0.7, "fifo": 0.3}
    return [
        store.sample(32, 20, rng=np.random.default_rng(1)),
        store.sample(32, 20, rng=np.random.default_rng(2), partitions=mix, mode="episodes"),
        store.sample(16, 150, rng=np.random.default_rng(3), mode="starts"),
    ]


def _assert_same(a: list[WindowBatch], b: list[WindowBatch]) -> None:
    for x, y in zip(a, b):
        for name in ("actions", "rewards", "terminated", "truncated", "time", "mask", "prev_actions", "prev_rewards"):
            assert (
                np.array_equal(getattr(x, name), getattr(y, name)) and getattr(x, name).dtype == getattr(y, name).dtype
            )
        for key in (*x.obs, *x.goals):
            mine, theirs = (x.obs, y.obs) if key in x.obs else (x.goals, y.goals)
            assert np.array_equal(mine[key], theirs[key]), key
        assert np.array_equal(x.partition, y.partition)


def _tier_files(url: Path) -> list[Path]:
    return sorted(p for p in (url / ".cache" / "tier").rglob("*.raw") if not p.name.startswith(".tmp-"))


def test_spill_and_tier_files_give_the_windows_of_ram(tmp_path: Path) -> None:
    url = _store(tmp_path)
    ram = TrajectoryStore.open(url, disk_tier=True, cache_bytes=2**30)
    expected = _batches(ram)
    row_bytes = sum(f.row_bytes for f in ram.fields.values())
    zarr_only = TrajectoryStore.open(url, cache_bytes=0, disk_tier=False)
    half = TrajectoryStore.open(url, disk_tier=True, cache_bytes=150 * row_bytes)
    none = TrajectoryStore.open(url, disk_tier=True, cache_bytes=0)
    for store in (zarr_only, half, none):
        _assert_same(expected, _batches(store))
    segments = len(ram.segments("protected")) + len(ram.segments("fifo"))
    assert none.warm() == {"ram": 0, "spill": segments, "tier": segments, "zarr": 0}
    assert zarr_only.warm()["zarr"] == segments and not zarr_only._sampler.spill  # type: ignore[union-attr]
    counts = half.warm()
    assert 0 < counts["ram"] < segments and counts["tier"] == segments - counts["ram"]
    assert len(_tier_files(url)) == segments
    assert os.listdir(url / ".cache" / "spill") == []  # the spill arena's files have no names
    again = TrajectoryStore.open(url, disk_tier=True, cache_bytes=0)  # another process finds the files and reuses them
    _assert_same(expected, _batches(again))
    assert again._sampler is not None and again._sampler.tier is not None and again._sampler.tier.built == 0


def test_torn_tier_files_are_rebuilt_and_a_file_cut_short_while_open_is_read_from_zarr(tmp_path: Path) -> None:
    url = _store(tmp_path)
    expected = _batches(TrajectoryStore.open(url, disk_tier=True, cache_bytes=2**30))
    TrajectoryStore.open(url, disk_tier=True, cache_bytes=0).warm()
    files = _tier_files(url)
    original = {p: p.read_bytes() for p in files}
    with open(files[0], "r+b") as f:  # what a power loss can leave of a file renamed before its data reached disk
        f.truncate(len(original[files[0]]) // 2)
    files[1].write_bytes(original[files[1]][:-TRAILER_BYTES] + b"\0" * TRAILER_BYTES)  # no trailer
    files[2].write_bytes(b"\0" * len(original[files[2]]))  # the right size, zeros
    fresh = TrajectoryStore.open(url, disk_tier=True, cache_bytes=0)
    _assert_same(expected, _batches(fresh))
    assert fresh._sampler is not None and fresh._sampler.tier is not None and fresh._sampler.tier.built == 3
    assert {p: p.read_bytes() for p in _tier_files(url)} == original
    for path in files:  # cut short under a reader that has them open: short reads, answered from zarr
        with open(path, "r+b") as f:
            f.truncate(4096)
    _assert_same(expected, _batches(fresh))


def test_a_build_that_fails_leaves_no_tier_file_and_dead_builders_temp_files_are_swept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import amago_pipe.store.tier as tier

    url = _store(tmp_path)
    calls = []

    def failing(*args: object, **kwargs: object) -> object:
        calls.append(1)
        raise RuntimeError("killed mid-build")

    monkeypatch.setattr(tier, "read_block", failing)
    with pytest.raises(RuntimeError, match="killed mid-build"):
        TrajectoryStore.open(url, disk_tier=True, cache_bytes=0).warm()
    assert calls and not [p for p in (url / ".cache" / "tier").rglob("*") if p.is_file()]
    monkeypatch.undo()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    stale = url / ".cache" / "tier" / "protected" / f".tmp-{int(dead.stdout)}-0000-x.raw"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"half")
    os.utime(stale, (1.0, 1.0))
    mine = stale.with_name(f".tmp-{os.getpid()}-0000-y.raw")  # a live builder's: kept
    mine.write_bytes(b"half")
    TrajectoryStore.open(url, disk_tier=True, cache_bytes=0).warm()
    assert not stale.exists() and mine.exists() and len(_tier_files(url)) == 5  # 4 protected + 1 fifo segments


def test_dropped_segments_lose_their_tier_files(tmp_path: Path) -> None:
    url = _store(tmp_path)
    store = TrajectoryStore.open(url, disk_tier=True, cache_bytes=0)
    store.warm()
    first = store.segments("protected")[0].id
    store.drop_segments("protected", [first])
    store.sample(8, 4, rng=np.random.default_rng(0))
    names = [p.stem for p in _tier_files(url)]
    assert first not in names and len(names) == 4  # of 5


def test_a_budget_smaller_than_a_segment_warns_with_the_size_it_needs(tmp_path: Path) -> None:
    url = _store(tmp_path)
    with pytest.warns(CacheBudgetWarning, match=r"cache_bytes=100 is smaller than segment \w+/\S+ \([\d,]+ bytes "
                      r"decompressed\).*give TrajectoryStore.open\(\.\.\., cache_bytes=[\d,]+\) or more"):  # fmt: skip
        TrajectoryStore.open(url, disk_tier=True, cache_bytes=100).sample(4, 4, rng=np.random.default_rng(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        TrajectoryStore.open(url, disk_tier=True, cache_bytes=0).sample(
            4, 4, rng=np.random.default_rng(0)
        )  # 0: no RAM, on purpose
        TrajectoryStore.open(url, disk_tier=True, cache_bytes=2**30).sample(4, 4, rng=np.random.default_rng(0))
    with pytest.raises(DataError, match=r"cache_bytes must be an integer >= 0 .*got -1"):
        TrajectoryStore.open(url, disk_tier=True, cache_bytes=-1)


def test_an_unusable_cache_dir_warns_and_reads_zarr(tmp_path: Path) -> None:
    url = _store(tmp_path)
    expected = _batches(TrajectoryStore.open(url, disk_tier=True, cache_bytes=2**30))
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the cache folder would go")
    store = TrajectoryStore.open(url, disk_tier=True, cache_bytes=0, cache_dir=blocker)
    with pytest.warns(TierWarning, match=r"no spill arena in .*not-a-dir.*read from zarr"):
        _assert_same(expected, _batches(store))


def test_a_segment_evicted_while_the_spill_arena_fills_is_not_served_half_empty(tmp_path: Path) -> None:
    """A segment held in RAM that vanishes before the spill arena loads it: its windows must not take their small
    fields (rewards, actions) from the spill arena, which holds nothing for it (they came back all zeros)."""
    url = tmp_path / "s.zarr"
    writer = TrajectoryStore.create(url, SPEC)
    rng = np.random.default_rng(0)
    with writer.writer("fifo", segment_timesteps=10) as w:
        w.add(random_episode(SPEC, 10, rng))
    row_bytes = sum(f.row_bytes for f in writer.fields.values())
    reader = TrajectoryStore.open(url, disk_tier=True, cache_bytes=20 * row_bytes, refresh_seconds=0.0)
    reader.sample(4, 4, rng=np.random.default_rng(0))  # the first segment, in RAM; nothing spilled yet
    first = writer.segments("fifo")[0].id
    with writer.writer("fifo", segment_timesteps=200) as w:
        w.add(random_episode(SPEC, 200, rng))  # too big for RAM: the spill arena opens
    sampler = reader._sampler
    assert sampler is not None
    real_load = sampler._load

    def evicted_meanwhile(key: str, dest: dict[str, np.ndarray]) -> bool:
        if key.endswith(first) and sampler.spill is not None and key.startswith("fifo/"):
            writer.drop_segments("fifo", [first])  # another process's eviction, between listing and loading
        return real_load(key, dest)

    sampler._load = evicted_meanwhile  # type: ignore[method-assign]
    warnings.simplefilter("ignore", CacheBudgetWarning)  # the second segment is bigger than RAM on purpose
    for seed in range(20):
        batch = reader.sample(16, 8, rng=np.random.default_rng(seed))
        for b in range(batch.batch_size):
            n = int(batch.mask[b].sum())
            assert np.any(batch.obs["state"][b, : n + 1] != 0), f"a window of all-zero observations (seed {seed})"
