"""Gymnasium spaces survive the JSON a DataSpec stores (so exports rebuild them exactly)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from gymnasium import spaces

from amago_pipe.errors import DataError
from amago_pipe.gym_spaces import space_from_json, space_to_json
from amago_pipe.spec import DataSpec, flatten_obs, from_spaces, nest_like

SPACES = [
    spaces.Box(np.array([-1.0, -np.inf, 0.0]), np.array([1.0, np.inf, 5.5]), (3,), np.float64),
    spaces.Box(0, 255, (8, 8, 3), np.uint8),
    spaces.Discrete(5, start=2),
    spaces.MultiBinary([2, 3]),
    spaces.MultiDiscrete([2, 5], dtype=np.int32, start=[1, 0]),
    spaces.Tuple((spaces.Discrete(4), spaces.Dict({"z": spaces.Box(-1, 1, (2,)), "a": spaces.MultiBinary(3)}))),
]


@pytest.mark.parametrize("space", SPACES, ids=lambda s: type(s).__name__)
def test_spaces_round_trip_through_json(space: spaces.Space) -> None:
    doc = json.loads(json.dumps(space_to_json(space), allow_nan=False))
    assert space_from_json(doc) == space


def test_data_spec_keeps_its_spaces_through_json() -> None:
    obs, act = SPACES[-1], spaces.Box(np.float32(-2), np.float32(3), (2,), np.float32)
    spec = from_spaces(obs, act)
    assert DataSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    sample = obs.sample()
    flat = {k: v[None] for k, v in flatten_obs(sample).items()}  # a one-step sequence
    nested = nest_like(obs, flat)
    assert isinstance(nested, tuple) and set(nested[1]) == {"a", "z"} and nested[1]["a"].dtype == np.int8


def test_multidiscrete_bounds_count_from_its_start() -> None:
    spec = from_spaces(spaces.MultiDiscrete([2, 5], start=[10, -1]), spaces.Discrete(2))
    arr = spec.observations["observation"]
    assert (arr.shape, arr.low, arr.high) == ((2,), -1.0, 11.0)


def test_unknown_stored_space_is_a_data_error() -> None:
    with pytest.raises(DataError, match="unknown stored space type 'Text'"):
        space_from_json({"type": "Text"})
