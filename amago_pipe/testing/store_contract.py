"""The store contract: partition, eviction, atomicity and sampling behaviour every trajectory store must show.

Use it from a test module by subclassing and giving a `store_factory` fixture that returns a callable
`(spec) -> store`, a fresh empty store on every call (reopened with `type(store).open(store.url)`):

    class TestZarrStore(StoreContract):
        @pytest.fixture
        def store_factory(self, tmp_path):
            paths = (tmp_path / f"s{i}.zarr" for i in itertools.count())
            return lambda spec: TrajectoryStore.create(next(paths), spec)

Importable without pytest (checks raise AssertionError); numpy only, no torch or click.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from amago_pipe.errors import DataError
from amago_pipe.spec import ArraySpec, DataSpec
from amago_pipe.testing.episodes import assert_episodes_equal, counting_episode, example_specs, random_episode

StoreFactory = Callable[[DataSpec], Any]


@contextmanager
def raises(exc: type[BaseException], match: str) -> Iterator[None]:
    """Like pytest.raises(exc, match=...) without pytest."""
    try:
        yield
    except exc as e:
        if not re.search(match, str(e)):
            raise AssertionError(f"{exc.__name__} raised, but {str(e)!r} does not match {match!r}") from e
        return
    raise AssertionError(f"{exc.__name__} matching {match!r} was not raised")


def _write(store: Any, partition: str, episodes: list[Any], **kwargs: Any) -> None:
    with store.writer(partition, **kwargs) as w:
        for ep in episodes:
            w.add(ep)


def _reopen(store: Any) -> Any:
    return type(store).open(store.url)


BOX = example_specs()["box"]


class StoreContract:
    """Checks shared by every store implementation; subclasses provide the `store_factory` fixture."""

    # ---------------------------------------------------------------- format and round trips

    def test_new_store_is_empty_and_keeps_its_spec(self, store_factory: StoreFactory) -> None:
        spec = example_specs()["dict"]
        store = store_factory(spec)
        assert store.partitions() == [] and store.segments("protected") == []
        assert list(store.iter_episodes("fifo")) == [] and store.fingerprint("fifo") == store.fingerprint("fifo")
        reopened = _reopen(store)
        assert reopened.spec == spec
        with raises(DataError, match="nothing to sample"):
            reopened.sample(2, 4, rng=np.random.default_rng(0))

    def test_every_space_kind_round_trips_bit_exact(self, store_factory: StoreFactory) -> None:
        rng = np.random.default_rng(0)
        for name, spec in example_specs().items():
            store = store_factory(spec)
            episodes = [
                random_episode(spec, int(n), rng, env_name=name, source="test", meta={"i": i})
                for i, n in enumerate([1, 7, 30])
            ]
            episodes[1].time_start = 500
            _write(store, "protected", episodes)
            back = list(_reopen(store).iter_episodes("protected"))
            assert len(back) == len(episodes), f"{name}: {len(back)} episodes read back, wrote {len(episodes)}"
            for i, (a, b) in enumerate(zip(episodes, back)):
                assert_episodes_equal(a, b, where=f"{name} episode {i}")

    def test_episode_not_matching_the_spec_is_refused_by_name(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        ep = random_episode(BOX, 5, np.random.default_rng(0))
        ep.obs["observation"] = ep.obs["observation"][:, :2]
        with (
            raises(DataError, match=r"observations\['observation'\] has shape \(6, 2\), expected \(6, 3\)"),
            store.writer("protected") as w,
        ):
            w.add(ep)
        assert store.segments("protected") == []

    def test_appending_with_another_spec_is_refused(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        other = DataSpec({"observation": ArraySpec((4,), "float32")}, BOX.action)
        with raises(DataError, match=r"observations\['observation'\]: store at .* has shape \(3,\)"):
            type(store).create(store.url, other, exist_ok=True)
        assert type(store).create(store.url, BOX, exist_ok=True).spec == BOX

    # ---------------------------------------------------------------- partitions and eviction

    def test_partitions_report_kind_counts_and_returns(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(1)
        eps = {
            p: [random_episode(BOX, int(n), rng) for n in rng.integers(1, 20, size=4)]
            for p in ("protected", "fifo", "relabeled")
        }
        for p, episodes in eps.items():
            _write(store, p, episodes)
        assert store.partitions() == ["fifo", "protected", "relabeled"]
        for p, kind in (("protected", "protected"), ("fifo", "fifo"), ("relabeled", "plain")):
            info = store.partition_info(p)
            returns = np.asarray([e.total_return for e in eps[p]])
            assert info.kind == kind and info.episodes == 4 and info.bytes > 0
            assert info.timesteps == sum(e.length for e in eps[p])
            assert np.isclose(info.return_mean, returns.mean()) and np.isclose(info.return_max, returns.max())
            assert np.isclose(info.return_std, returns.std()) and np.isclose(info.return_min, returns.min())

    def test_fifo_capacity_evicts_oldest_segments_first(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        store.configure_partition("fifo", kind="fifo", capacity_timesteps=100)
        rng = np.random.default_rng(2)
        written = []
        for i in range(6):
            _write(store, "fifo", [random_episode(BOX, 30, rng, meta={"i": i})])
            written.append(store.segments("fifo")[-1].id)
        kept = [s.id for s in store.segments("fifo")]
        assert kept == written[-3:], f"expected the 3 newest segments to remain, got {kept}"
        assert [e.meta["i"] for e in store.iter_episodes("fifo")] == [3, 4, 5]
        assert store.partition_info("fifo").timesteps == 90

    def test_evict_returns_removed_timesteps_and_keeps_newest(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(3)
        for n in (10, 20, 30):
            _write(store, "fifo", [random_episode(BOX, n, rng)])
        assert store.evict("fifo", 35) == 30
        assert [s.timesteps for s in store.segments("fifo")] == [30]
        assert store.evict("fifo", 1000) == 0

    def test_protected_is_never_evicted(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        _write(store, "protected", [random_episode(BOX, 10, np.random.default_rng(4))])
        with raises(DataError, match="protected and never evicted"):
            store.evict("protected", 0)
        assert store.partition_info("protected").timesteps == 10

    def test_drop_segments_removes_exactly_those(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(5)
        for i in range(3):
            _write(store, "relabeled", [random_episode(BOX, 5, rng, meta={"i": i})], attrs={"n": i})
        segs = store.segments("relabeled")
        assert [s.attrs for s in segs] == [{"n": 0}, {"n": 1}, {"n": 2}]
        before = store.fingerprint("relabeled")
        store.drop_segments("relabeled", [segs[1].id])
        assert [e.meta["i"] for e in store.iter_episodes("relabeled")] == [0, 2]
        assert store.fingerprint("relabeled") != before
        store.drop_segments("relabeled", [segs[1].id])  # already gone: nothing happens

    # ---------------------------------------------------------------- atomicity and visibility

    def test_atomic_writer_commits_everything_at_once(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(6)
        other = _reopen(store)
        with store.writer("protected", atomic=True, segment_timesteps=5) as w:
            for _ in range(4):
                w.add(random_episode(BOX, 8, rng))
            w.flush()
            assert other.segments("protected") == [], "an atomic writer's data became visible before its exit"
        assert [s.episodes for s in other.segments("protected")] == [4]

    def test_atomic_writer_error_leaves_nothing(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(7)
        with raises(RuntimeError, match="boom"), store.writer("protected", atomic=True) as w:
            w.add(random_episode(BOX, 8, rng))
            w.flush()
            raise RuntimeError("boom")
        assert store.segments("protected") == []
        assert list(_reopen(store).iter_episodes("protected")) == []

    def test_plain_writer_seals_on_flush_and_when_full(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(8)
        other = _reopen(store)
        with store.writer("fifo", segment_timesteps=20) as w:
            for _ in range(3):
                w.add(random_episode(BOX, 10, rng))
            assert [s.timesteps for s in other.segments("fifo")] == [20], "a full segment was not sealed"
            w.flush()
            assert [s.timesteps for s in other.segments("fifo")] == [20, 10]
            w.add(random_episode(BOX, 3, rng))
        assert [s.timesteps for s in other.segments("fifo")] == [20, 10, 3]

    # ---------------------------------------------------------------- sampling

    def test_windows_have_documented_shapes_and_zero_padding(self, store_factory: StoreFactory) -> None:
        spec = example_specs()["image"]
        store = store_factory(spec)
        _write(store, "protected", [random_episode(spec, n, np.random.default_rng(n)) for n in (3, 12)])
        batch = store.sample(16, 8, rng=np.random.default_rng(0))
        assert batch.obs["pixels"].shape == (16, 9, 8, 8, 3) and batch.obs["pixels"].dtype == np.uint8
        assert batch.actions.shape == (16, 8, 1) and batch.rewards.shape == (16, 8) and batch.mask.shape == (16, 8)
        assert batch.time.shape == (16, 9) and batch.prev_actions.shape == (16, 1) and batch.prev_rewards.shape == (16,)
        assert batch.terminated.dtype == np.bool_ and batch.mask.dtype == np.bool_
        pad = ~batch.mask
        assert not batch.rewards[pad].any() and not batch.actions[pad].any() and not batch.terminated[pad].any()
        assert not batch.obs["pixels"][~batch.obs_mask].any() and not batch.time[~batch.obs_mask].any()
        lengths = batch.mask.sum(axis=1)
        assert set(lengths.tolist()) <= {3, 8}, f"windows of a 3-step and a 12-step episode had lengths {set(lengths)}"

    def test_windows_are_contiguous_pieces_of_one_episode(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        firsts = [0, 1000, 2000, 3000]
        _write(store, "protected", [counting_episode(BOX, n, f, time_start=7) for n, f in zip((5, 40, 17, 64), firsts)])
        batch = store.sample(64, 16, rng=np.random.default_rng(1))
        for b in range(64):
            n = int(batch.mask[b].sum())
            r = batch.rewards[b, :n]
            assert np.array_equal(np.diff(r), np.ones(n - 1)), f"window {b} is not contiguous: {r}"
            assert np.array_equal(batch.obs["observation"][b, : n + 1, 0], np.arange(r[0], r[0] + n + 1))
            start = int(r[0]) % 1000
            assert batch.time[b, 0] == 7 + start and batch.time[b, n] == 7 + start + n
            expected_prev = r[0] - 1 if start > 0 else 0.0
            assert batch.prev_rewards[b] == expected_prev, f"window {b}: prev reward {batch.prev_rewards[b]}"

    def test_sampling_is_deterministic_for_a_seed(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(9)
        _write(store, "protected", [random_episode(BOX, int(n), rng) for n in rng.integers(1, 50, size=10)])
        _write(store, "fifo", [random_episode(BOX, int(n), rng) for n in rng.integers(1, 50, size=10)])
        mix = {"protected": 0.5, "fifo": 0.5}
        for mode in ("timesteps", "episodes", "starts"):
            a = store.sample(32, 12, partitions=mix, rng=np.random.default_rng(42), mode=mode)
            b = _reopen(store).sample(32, 12, partitions=mix, rng=np.random.default_rng(42), mode=mode)
            for name in ("actions", "rewards", "time", "mask", "prev_actions", "partition"):
                assert np.array_equal(getattr(a, name), getattr(b, name)), f"{mode}: {name} differs for the same seed"

    def test_partition_weights_set_the_mixture(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        rng = np.random.default_rng(10)
        _write(store, "protected", [random_episode(BOX, 50, rng)])
        _write(store, "fifo", [random_episode(BOX, 5, rng)])
        batch = store.sample(4000, 4, partitions={"protected": 0.25, "fifo": 0.75}, rng=np.random.default_rng(0))
        share = float(np.mean(np.asarray(batch.partition_names)[batch.partition] == "fifo"))
        assert abs(share - 0.75) < 0.04, f"fifo share {share:.3f}, expected 0.75"
        only = store.sample(64, 4, partitions={"protected": 1.0, "fifo": 0.0}, rng=np.random.default_rng(0))
        assert set(np.asarray(only.partition_names)[only.partition]) == {"protected"}
        with raises(DataError, match="no partition 'fifoo'.*did you mean 'fifo'"):
            store.sample(4, 4, partitions={"fifoo": 1.0}, rng=np.random.default_rng(0))

    def test_every_timestep_is_reachable(self, store_factory: StoreFactory) -> None:
        store = store_factory(BOX)
        lengths = (3, 9, 25)
        _write(store, "protected", [counting_episode(BOX, n, 1000 * i) for i, n in enumerate(lengths)])
        for mode in ("timesteps", "episodes", "starts"):
            batch = store.sample(3000, 6, rng=np.random.default_rng(3), mode=mode)
            seen = set(batch.rewards[batch.mask].astype(int).tolist())
            expected = {1000 * i + t for i, n in enumerate(lengths) for t in range(n)}
            assert seen == expected, f"{mode}: unreachable timesteps {sorted(expected - seen)[:10]}"
