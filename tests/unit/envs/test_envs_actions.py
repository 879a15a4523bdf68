"""ActionCodec: [-1, 1] <-> Box bounds, id validation and rl2 action features for every action kind."""

from __future__ import annotations

import numpy as np
import pytest

from amago_pipe.actions import ActionCodec
from amago_pipe.errors import DataError
from amago_pipe.spec import ActionSpec


def box(low: list[float], high: list[float]) -> ActionCodec:
    return ActionCodec(ActionSpec("continuous", (len(low),), low=tuple(low), high=tuple(high)))


def test_continuous_unit_maps_to_bounds_and_back() -> None:
    codec = box([-2.0, 0.0], [4.0, 1.0])
    unit = np.array([[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0], [3.0, -7.0]], dtype=np.float32)
    env = codec.to_env(unit)
    np.testing.assert_allclose(env, [[-2, 0], [1, 0.5], [4, 1], [4, 0]])  # out-of-range values are clipped
    np.testing.assert_allclose(codec.to_unit(env), np.clip(unit, -1, 1), atol=1e-6)
    assert env.dtype == np.float32


def test_unbounded_continuous_dims_pass_through() -> None:
    codec = box([-np.inf, -1.0], [np.inf, 3.0])
    env = codec.to_env(np.array([[5.0, 1.0]], dtype=np.float32))
    np.testing.assert_allclose(env, [[5.0, 3.0]])
    np.testing.assert_allclose(codec.rl2_features(env), [[5.0, 1.0]])


def test_discrete_ids_are_checked_and_one_hot_encoded() -> None:
    codec = ActionCodec(ActionSpec("discrete", (), n=3))
    ids = codec.to_env(np.array([[2], [0]]))  # (N, 1) is accepted
    np.testing.assert_array_equal(ids, [2, 0])
    np.testing.assert_array_equal(codec.rl2_features(ids), [[0, 0, 1], [1, 0, 0]])
    with pytest.raises(DataError, match=r"action ids \[3, 0\] outside \[0, 3\)"):
        codec.to_env(np.array([3, 0]))
    with pytest.raises(DataError, match="non-integer actions"):
        codec.to_env(np.array([0.5, 1.0]))
    with pytest.raises(DataError, match=r"expected \(n_envs, \*\(\)\)"):
        codec.to_env(np.zeros((2, 2), dtype=np.int64))


def test_multidiscrete_and_multibinary_features() -> None:
    md = ActionCodec(ActionSpec("multidiscrete", (2,), nvec=(2, 3)))
    np.testing.assert_array_equal(md.rl2_features(np.array([[1, 2]])), [[0, 1, 0, 0, 1]])
    with pytest.raises(DataError, match="outside"):
        md.to_env(np.array([[2, 0]]))
    mb = ActionCodec(ActionSpec("multibinary", (3,), n=3))
    np.testing.assert_array_equal(mb.rl2_features(np.array([[1, 0, 1]])), [[1.0, 0.0, 1.0]])


def test_non_finite_continuous_actions_are_rejected() -> None:
    with pytest.raises(DataError, match="non-finite continuous actions"):
        box([-1.0], [1.0]).to_env(np.array([[np.nan]]))
