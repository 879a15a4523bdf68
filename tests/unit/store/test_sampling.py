"""Window sampling beyond the contract: coverage statistics, RAM budget (cold reads), refresh, vanishing segments."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.errors import ConfigError, DataError
from amago_pipe.store import TrajectoryStore, WindowBatch
from amago_pipe.testing.episodes import counting_episode, example_specs, random_episode

BOX = example_specs()["box"]


def _store(
    tmp_path: Path, lengths: list[int], *, segment_timesteps: int = 100_000, **open_kwargs: float
) -> TrajectoryStore:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with store.writer("protected", segment_timesteps=segment_timesteps) as w:
        for i, n in enumerate(lengths):
            w.add(counting_episode(BOX, n, 10_000 * i))
    return TrajectoryStore.open(tmp_path / "s.zarr", **open_kwargs)  # type: ignore[arg-type]


def _coverage(batch: WindowBatch, length: int) -> np.ndarray:
    """How often each step of episode 0 (rewards 0..length-1) appears in valid window positions."""
    steps = batch.rewards[batch.mask].astype(np.int64)
    return np.bincount(steps[steps < length], minlength=length)


def test_default_mode_does_not_under_sample_episode_ends(tmp_path: Path) -> None:
    length, seq_len = 200, 16
    store = _store(tmp_path, [length])
    cover = _coverage(store.sample(20_000, seq_len, rng=np.random.default_rng(0)), length)
    interior = cover[seq_len:-seq_len].mean()
    assert cover[-1] > 0.9 * interior and cover[0] > 0.9 * interior, (cover[:3], interior, cover[-3:])
    assert cover.min() > 0.9 * interior and cover.max() < 2.1 * interior
    starts = _coverage(store.sample(20_000, seq_len, rng=np.random.default_rng(0), mode="starts"), length)
    assert starts[-1] < 0.2 * starts[seq_len:-seq_len].mean()  # why "starts" is not the default


def test_timesteps_mode_weights_episodes_by_raw_starts_episodes_mode_uniformly(tmp_path: Path) -> None:
    store = _store(tmp_path, [10, 90])
    batch = store.sample(5000, 4, rng=np.random.default_rng(1))
    long_share = float(np.mean(batch.rewards[:, 0] >= 10_000))
    assert abs(long_share - 93 / 106) < 0.03  # T + L - 1 raw starts each
    batch = store.sample(5000, 4, rng=np.random.default_rng(1), mode="episodes")
    assert abs(float(np.mean(batch.rewards[:, 0] >= 10_000)) - 0.5) < 0.03


def test_cold_reads_give_the_same_windows_as_ram(tmp_path: Path) -> None:
    lengths = [5, 40, 130, 7, 64]
    hot = _store(tmp_path, lengths, segment_timesteps=40)  # segments of 47, 131 and 73 rows
    row_bytes = sum(f.row_bytes for f in hot.fields.values())
    cold = TrajectoryStore.open(tmp_path / "s.zarr", cache_bytes=1)
    half = TrajectoryStore.open(tmp_path / "s.zarr", cache_bytes=150 * row_bytes)
    batches = [s.sample(48, 20, rng=np.random.default_rng(7)) for s in (hot, cold, half)]
    assert hot._sampler is not None and cold._sampler is not None and half._sampler is not None
    assert len(hot._sampler.cache.placed) == 3 and not cold._sampler.cache.placed
    assert 0 < len(half._sampler.cache.placed) < 3
    for other in batches[1:]:
        for name in ("actions", "rewards", "terminated", "truncated", "time", "mask", "prev_actions", "prev_rewards"):
            assert np.array_equal(getattr(batches[0], name), getattr(other, name)), name
        assert np.array_equal(batches[0].obs["observation"], other.obs["observation"])


def test_new_segments_of_other_writers_appear_after_refresh(tmp_path: Path) -> None:
    reader = _store(tmp_path, [20], refresh_seconds=3600)
    reader.sample(4, 4, rng=np.random.default_rng(0))
    writer = TrajectoryStore.open(tmp_path / "s.zarr")
    with writer.writer("protected") as w:
        w.add(counting_episode(BOX, 20, 50_000))
    seen = reader.sample(400, 4, rng=np.random.default_rng(0)).rewards
    assert not (seen >= 50_000).any()  # listing is at most refresh_seconds old
    reader.refresh()
    assert (reader.sample(400, 4, rng=np.random.default_rng(0)).rewards >= 50_000).any()


@pytest.mark.parametrize("cache_bytes", [1, 2**30])
def test_evicted_segments_are_not_sampled_and_cold_readers_resample(tmp_path: Path, cache_bytes: int) -> None:
    reader = _store(tmp_path, [30, 30, 30], segment_timesteps=30, cache_bytes=cache_bytes, refresh_seconds=3600)
    reader.sample(8, 4, rng=np.random.default_rng(0))
    other = TrajectoryStore.open(tmp_path / "s.zarr")
    other.configure_partition("protected", kind="plain")
    assert other.evict("protected", 30) == 60
    batch = reader.sample(200, 4, rng=np.random.default_rng(1))  # listing is stale: RAM still has the data
    if cache_bytes == 1:  # cold reads found the segments gone, re-listed and drew again
        assert (batch.rewards[batch.mask] >= 20_000).all()
    reader.refresh()
    batch = reader.sample(200, 4, rng=np.random.default_rng(1))
    assert (batch.rewards[batch.mask] >= 20_000).all()


def test_fifo_churn_reuses_cache_space(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX, cache_bytes=200 * 45)
    store.configure_partition("fifo", capacity_timesteps=120)
    for i in range(12):
        with store.writer("fifo") as w:
            w.add(counting_episode(BOX, 40, 1000 * i))
        batch = store.sample(64, 8, rng=np.random.default_rng(i))
        first = batch.rewards[:, 0]
        assert (first >= 1000 * max(0, i - 2)).all(), f"round {i}: evicted data sampled"
        assert store._sampler is not None
        assert store._sampler.cache.capacity * store._sampler.cache.row_bytes <= store.cache_bytes


def test_empty_partition_in_the_mixture_is_skipped(tmp_path: Path) -> None:
    store = _store(tmp_path, [20])
    store.configure_partition("fifo", capacity_timesteps=100)
    batch = store.sample(32, 4, partitions={"protected": 0.5, "fifo": 0.5}, rng=np.random.default_rng(0))
    assert set(np.asarray(batch.partition_names)[batch.partition]) == {"protected"}
    with pytest.raises(DataError, match="partitions fifo hold no episodes"):
        store.sample(4, 4, partitions={"fifo": 1.0}, rng=np.random.default_rng(0))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size must be a positive integer, got 0"),
        ({"seq_len": -1}, "seq_len must be a positive integer, got -1"),
        ({"mode": "timestep"}, "unknown mode 'timestep' .*did you mean 'timesteps'"),
        ({"partitions": {}}, "`partitions` is empty"),
        ({"partitions": {"protected": -1.0}}, "weight of partition 'protected' is -1.0"),
    ],
)
def test_bad_sample_arguments(tmp_path: Path, kwargs: dict, message: str) -> None:
    store = _store(tmp_path, [5])
    args = {"batch_size": 2, "seq_len": 3, "rng": np.random.default_rng(0), **kwargs}
    with pytest.raises(ConfigError, match=message):
        store.sample(**args)


def test_goals_and_discrete_actions_are_gathered(tmp_path: Path) -> None:
    for kind in ("goals", "discrete", "dict"):
        spec = example_specs()[kind]
        store = TrajectoryStore.create(tmp_path / f"{kind}.zarr", spec)
        ep = random_episode(spec, 12, np.random.default_rng(3))
        with store.writer("protected") as w:
            w.add(ep)
        batch = store.sample(8, 12, rng=np.random.default_rng(0))
        for key, value in ep.goals.items():
            assert np.array_equal(batch.goals[key][0], value)
        for key, value in ep.obs.items():
            assert np.array_equal(batch.obs[key][0], value) and batch.obs[key].dtype == value.dtype
        assert np.array_equal(batch.actions[0], ep.actions) and batch.actions.dtype == ep.actions.dtype


def _sample_in_child(store: TrajectoryStore, queue: multiprocessing.Queue[list[float]]) -> None:
    queue.put(store.sample(4, 4, rng=np.random.default_rng(5)).rewards[:, 0].tolist())


def test_a_forked_process_keeps_sampling(tmp_path: Path) -> None:
    store = _store(tmp_path, [30, 30], cache_bytes=1)  # cold: the child must read zarr itself
    expected = store.sample(4, 4, rng=np.random.default_rng(5)).rewards[:, 0].tolist()
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_sample_in_child, args=(store, queue))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0 and queue.get(timeout=5) == expected


def _task_store(tmp_path: Path) -> TrajectoryStore:
    """Task `a`: 9 episodes of 50 steps (rewards below 100,000); task `b`: one of 50 (rewards from 100,000)."""
    store = TrajectoryStore.create(tmp_path / "t.zarr", BOX)
    with store.writer("protected", segment_timesteps=120) as w:
        for i in range(10):
            ep = counting_episode(BOX, 50, 10_000 * i if i < 9 else 100_000)
            w.add(type(ep)(**{**ep.__dict__, "env_name": "a" if i < 9 else "b"}))
    return TrajectoryStore.open(tmp_path / "t.zarr")


@pytest.mark.parametrize("mode", ["timesteps", "episodes", "starts"])
def test_balance_task_gives_every_task_the_same_share(tmp_path: Path, mode: str) -> None:
    store = _task_store(tmp_path)
    share_b = {
        balance: float(
            np.mean(
                store.sample(4000, 8, rng=np.random.default_rng(0), mode=mode, balance=balance).rewards[:, 0] >= 100_000
            )
        )
        for balance in ("none", "task")
    }
    assert abs(share_b["none"] - 0.1) < 0.03 and abs(share_b["task"] - 0.5) < 0.04, share_b
    batch = store.sample(4000, 8, rng=np.random.default_rng(0), mode=mode, balance="task")
    assert batch.mask.all()  # windows stay inside their episodes
    with pytest.raises(ConfigError, match=r"unknown balance 'tasks' \(known: none, task\)"):
        store.sample(4, 8, rng=np.random.default_rng(0), balance="tasks")


def test_balance_reads_task_names_of_segments_sealed_before_markers_held_them(tmp_path: Path) -> None:
    import json

    from amago_pipe.store.format import marker_key

    store = _task_store(tmp_path)
    backend = store.files.backend
    for seg in store.segments("protected"):  # as an older version wrote them: no env_names in the marker
        key = marker_key("protected", seg.id)
        doc = json.loads(backend.read_bytes(key) or b"{}")
        assert len(doc.pop("env_names")) == seg.episodes
        backend.write_atomic(key, json.dumps(doc).encode())
    old = TrajectoryStore.open(tmp_path / "t.zarr")
    batch = old.sample(4000, 8, rng=np.random.default_rng(0), balance="task")
    assert abs(float(np.mean(batch.rewards[:, 0] >= 100_000)) - 0.5) < 0.04


def test_sample_with_tasks_names_each_windows_task(tmp_path: Path) -> None:
    """`tasks=True` gives each window its episode's env name (task "b" episodes hold rewards >= 100,000), over a
    mixture of two partitions too; `task_names` lists a partition's tasks."""
    store = _task_store(tmp_path)
    assert store.task_names("protected") == ["a", "b"]
    batch = store.sample(400, 8, rng=np.random.default_rng(0), balance="task", tasks=True)
    is_b = np.asarray([n == "b" for n in batch.env_names])
    assert len(batch.env_names) == 400 and np.array_equal(is_b, batch.rewards[:, 0] >= 100_000)
    assert store.sample(4, 8, rng=np.random.default_rng(0)).env_names == ()  # not asked for
    with store.writer("fifo") as w:
        ep = counting_episode(BOX, 20, 0)
        w.add(type(ep)(**{**ep.__dict__, "env_name": "c"}))
    mixed = store.sample(200, 4, partitions={"protected": 1.0, "fifo": 1.0}, rng=np.random.default_rng(1), tasks=True)
    from_fifo = mixed.partition == mixed.partition_names.index("fifo")
    assert from_fifo.any() and all((n == "c") == f for n, f in zip(mixed.env_names, from_fifo, strict=True))
