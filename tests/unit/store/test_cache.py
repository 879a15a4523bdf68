"""SegmentCache: segments share arena arrays within the budget; freed rows are reused; row 0 stays zero."""

from __future__ import annotations

import numpy as np

from amago_pipe.store.cache import SegmentCache
from amago_pipe.store.format import FieldSpec

FIELDS = {"x": FieldSpec("x", (2,), np.dtype(np.float32)), "r": FieldSpec("r", (), np.dtype(np.float32))}  # 12 B/row


def _data(value: float, rows: int) -> dict[str, np.ndarray]:
    return {"x": np.full((rows, 2), value, np.float32), "r": np.full(rows, value, np.float32)}


def _check(cache: SegmentCache, expected: dict[str, tuple[float, int]]) -> None:
    assert set(cache.placed) == set(expected)
    for key, (value, rows) in expected.items():
        lo, n = cache.placed[key]
        assert (
            n == rows
            and (cache.arrays["r"][lo : lo + n] == value).all()
            and (cache.arrays["x"][lo : lo + n] == value).all()
        )
    assert not cache.arrays["x"][0].any() and cache.arrays["r"][0] == 0


def test_admit_within_budget_first_fill_is_exact() -> None:
    cache = SegmentCache(FIELDS, budget_bytes=12 * 30)
    cache.admit([("a", 10), ("b", 25), ("c", 15)], lambda k: _data(ord(k), {"a": 10, "b": 25, "c": 15}[k]))
    _check(cache, {"a": (ord("a"), 10), "c": (ord("c"), 15)})  # b does not fit next to a
    assert cache.capacity == 26


def test_freed_rows_are_reused() -> None:
    sizes = {"a": 10, "b": 10, "c": 10, "e": 5}
    cache = SegmentCache(FIELDS, budget_bytes=12 * 40)
    cache.admit([(k, sizes[k]) for k in "abc"], lambda k: _data(ord(k), sizes[k]))
    cache.forget({"b", "c"})
    cache.admit([("e", 5)], lambda k: _data(ord(k), sizes[k]))
    assert cache.placed["e"] == (1, 5) and cache.capacity == 31  # the hole left by a, no growth
    _check(cache, {k: (ord(k), sizes[k]) for k in "bce"})


def test_compaction_then_growth_up_to_the_budget() -> None:
    sizes = {"a": 10, "b": 10, "c": 10, "d": 25}
    cache = SegmentCache(FIELDS, budget_bytes=12 * 40)
    cache.admit([(k, sizes[k]) for k in "abc"], lambda k: _data(ord(k), sizes[k]))
    cache.forget({"b"})
    cache.admit([("d", 25)], lambda k: _data(ord(k), sizes[k]))  # no hole fits: b slides down, arena grows
    assert cache.placed == {"b": (1, 10), "d": (11, 25)} and cache.capacity == 40
    _check(cache, {"b": (ord("b"), 10), "d": (ord("d"), 25)})
    cache.admit([("a", 10)], lambda k: _data(ord(k), sizes[k]))  # over budget: stays cold
    assert "a" not in cache.placed and cache.nbytes <= 12 * 40


def test_vanished_segment_is_skipped() -> None:
    cache = SegmentCache(FIELDS, budget_bytes=12 * 100)
    cache.admit([("a", 5), ("b", 5)], lambda k: None if k == "a" else _data(2.0, 5))
    _check(cache, {"b": (2.0, 5)})
