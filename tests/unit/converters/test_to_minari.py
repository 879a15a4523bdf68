"""Store → Minari export: lossless round trips for several space kinds, and its errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from amago_pipe.converters.to_minari import export_to_minari, spaces_from_spec
from converter_helpers import run, stored
from gymnasium import spaces

from amago_pipe.errors import DataError
from amago_pipe.spec import from_spaces
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.testing import synthetic as syn
from amago_pipe.testing.episodes import assert_episodes_equal

CASES = {
    "box-discrete": (spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(3)),
    "dict-tuple-box": (
        spaces.Dict(
            {"a": spaces.Tuple((spaces.Discrete(4), spaces.Box(0, 255, (4, 4), np.uint8))), "b": spaces.MultiBinary(2)}
        ),
        spaces.Box(-1, 1, (2,), np.float32),
    ),
    "multidiscrete": (spaces.MultiDiscrete([2, 5]), spaces.MultiDiscrete([3, 3])),
    "multibinary": (spaces.Box(-np.inf, np.inf, (2,), np.float64), spaces.MultiBinary(4)),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_store_to_minari_to_store_is_identical(tmp_path: Path, case: str):
    obs_space, act_space = CASES[case]
    buffers, _ = syn.sampled_minari_episodes(obs_space, act_space, [3, 5], ["terminal", "timeout"])
    syn.write_minari("src/data-v0", buffers, obs_space, act_space)
    run(tmp_path / "a.zarr", source="minari", dataset="src/data-v0")
    summary = export_to_minari(tmp_path / "a.zarr", "protected", "out/data-v0")
    assert (summary["episodes"], summary["timesteps"]) == (2, 8)
    run(tmp_path / "b.zarr", source="minari", dataset="out/data-v0")
    a, b = TrajectoryStore.open(tmp_path / "a.zarr"), TrajectoryStore.open(tmp_path / "b.zarr")
    assert a.spec == b.spec
    for x, y in zip(stored(tmp_path / "a.zarr"), stored(tmp_path / "b.zarr"), strict=True):
        assert_episodes_equal(x, y)


def test_pieces_goals_and_metadata_survive(tmp_path: Path):
    from amago_pipe.spec import ArraySpec

    base = from_spaces(spaces.Box(-1, 1, (2,), np.float32), spaces.Discrete(2))
    spec = type(base)(
        observations=base.observations,
        action=base.action,
        goals={"achieved_goal": ArraySpec((2,), "float32"), "desired_goal": ArraySpec((2,), "float32")},
    )
    store = TrajectoryStore.create(tmp_path / "a.zarr", spec)
    rng = np.random.default_rng(0)
    episode = Episode(
        obs={"observation": rng.standard_normal((4, 2)).astype(np.float32)},
        actions=np.array([0, 1, 1]),
        rewards=np.ones(3, np.float32),
        terminated=np.zeros(3, bool),
        truncated=np.zeros(3, bool),
        goals={k: rng.standard_normal((4, 2)).astype(np.float32) for k in ("achieved_goal", "desired_goal")},
        env_name="maze",
        source="collect:x",
        time_start=40,
        meta={"task": [1, 2]},
    )
    with store.writer("fifo") as writer:
        writer.add(episode)
    export_to_minari(tmp_path / "a.zarr", "fifo", "out/pieces-v0")
    run(tmp_path / "b.zarr", source="minari", dataset="out/pieces-v0", partition="fifo")
    (back,) = stored(tmp_path / "b.zarr", "fifo")
    assert_episodes_equal(episode, back)
    for key in episode.goals:
        np.testing.assert_array_equal(back.goals[key], episode.goals[key])


def test_spaces_from_spec_nests_flattened_keys():
    obs_space, act_space = CASES["dict-tuple-box"]
    spec = from_spaces(obs_space, act_space)
    assert spaces_from_spec(spec) == (obs_space, act_space)  # the recorded spaces
    rebuilt, action = spaces_from_spec(dataclasses.replace(spec, spaces=None))  # a spec without: inferred
    assert set(rebuilt["a"].spaces) == {"0", "1"} and rebuilt["a"]["1"].dtype == np.uint8
    assert isinstance(action, spaces.Box) and action.shape == (2,)


SPACE_CASES = {
    "box": (
        spaces.Box(np.array([-1.0, -np.inf, 0.0]), np.array([1.0, np.inf, 5.5]), (3,), np.float64),
        spaces.Box(np.array([-2.0, 0.0], np.float32), np.array([2.0, 1.0], np.float32), (2,), np.float32),
    ),
    "discrete": (spaces.Discrete(5, start=2), spaces.Discrete(3)),
    "dict": (spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "door": spaces.Discrete(2)}), spaces.Discrete(4)),
    "tuple": (spaces.Tuple((spaces.Discrete(4), spaces.Box(0, 255, (3, 3), np.uint8))), spaces.Box(-1, 1, (1,))),
    "multidiscrete": (spaces.MultiDiscrete([2, 5], dtype=np.int32), spaces.Discrete(2)),
    "nested": CASES["dict-tuple-box"],
}


def assert_nested_equal(a: Any, b: Any) -> None:
    assert type(a) is type(b)
    if isinstance(a, dict):
        assert list(a) == list(b)
        for key in a:
            assert_nested_equal(a[key], b[key])
    elif isinstance(a, tuple):
        for x, y in zip(a, b, strict=True):
            assert_nested_equal(x, y)
    else:
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("case", sorted(SPACE_CASES))
def test_minari_to_store_to_minari_gives_back_the_same_spaces(tmp_path: Path, case: str):
    import minari

    obs_space, act_space = SPACE_CASES[case]
    buffers, _ = syn.sampled_minari_episodes(obs_space, act_space, [4, 2], ["terminal", "timeout"])
    syn.write_minari("src/spaces-v0", buffers, obs_space, act_space)
    run(tmp_path / "a.zarr", source="minari", dataset="src/spaces-v0")
    export_to_minari(tmp_path / "a.zarr", "protected", "out/spaces-v0")
    source, back = minari.load_dataset("src/spaces-v0"), minari.load_dataset("out/spaces-v0")
    assert back.observation_space == obs_space and back.action_space == act_space
    for a, b in zip(source.iterate_episodes(), back.iterate_episodes(), strict=True):
        assert_nested_equal(a.observations, b.observations)
        assert_nested_equal(a.actions, b.actions)
        np.testing.assert_allclose(a.rewards, b.rewards, rtol=1e-6)  # the store keeps float32 rewards


def test_errors(tmp_path: Path, minari_root: Path):
    obs_space, act_space = CASES["box-discrete"]
    buffers, _ = syn.sampled_minari_episodes(obs_space, act_space, [3], ["terminal"])
    syn.write_minari("src/e-v0", buffers, obs_space, act_space)
    run(tmp_path / "a.zarr", source="minari", dataset="src/e-v0")
    with pytest.raises(DataError, match=r"--partition: store .* has no partition 'fifo' \(it has: protected\)"):
        export_to_minari(tmp_path / "a.zarr", "fifo", "out/e-v0")
    with pytest.raises(DataError, match=r"'out/e' is not a Minari dataset id; expected 'namespace/name-v0'"):
        export_to_minari(tmp_path / "a.zarr", "protected", "out/e")
    with pytest.raises(DataError, match=r"--dataset-id: a Minari dataset 'src/e-v0' already exists .* never replaced"):
        export_to_minari(tmp_path / "a.zarr", "protected", "src/e-v0", force=True)  # not ours: --force is no help
    export_to_minari(tmp_path / "a.zarr", "protected", "out/e-v0")
    with pytest.raises(DataError, match=r"--dataset-id: a Minari dataset 'out/e-v0' already exists .* pass --force"):
        export_to_minari(tmp_path / "a.zarr", "protected", "out/e-v0")
    export_to_minari(tmp_path / "a.zarr", "protected", "out/e-v0", force=True)  # ours: replaced
    other = tmp_path / "elsewhere"
    export_to_minari(tmp_path / "a.zarr", "protected", "out/e-v1", root=other)
    assert (other / "out/e-v1/data/main_data.hdf5").exists() and not (minari_root / "out/e-v1").exists()
