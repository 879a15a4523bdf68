"""Minari converter: every space kind, N+1 observations, subsets, metadata filters, env spec, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from converter_helpers import run, stored
from gymnasium import spaces

from amago_pipe.errors import ConfigError, DataError
from amago_pipe.spec import flatten_space
from amago_pipe.testing import synthetic as syn

BOX = spaces.Box(-1, 1, (3,), np.float32)
OBS_SPACES = {
    "box": BOX,
    "discrete": spaces.Discrete(5),
    "multibinary": spaces.MultiBinary(4),
    "multidiscrete": spaces.MultiDiscrete([3, 2]),
    "image": spaces.Box(0, 255, (8, 8, 3), np.uint8),
    "dict": spaces.Dict({"pos": BOX, "inner": spaces.Dict({"flag": spaces.Discrete(2)})}),
    "tuple": spaces.Tuple((BOX, spaces.MultiBinary(2))),
}
ACTION_SPACES = {
    "box": spaces.Box(-2, 2, (2,), np.float32),
    "discrete": spaces.Discrete(3),
    "multibinary": spaces.MultiBinary(3),
    "multidiscrete": spaces.MultiDiscrete([2, 4]),
}
LENGTHS, ENDS = [4, 6, 3], ["terminal", "timeout", "none"]


def make(dataset_id: str, obs_space, act_space, lengths=LENGTHS, ends=ENDS, **kw):
    buffers, truth = syn.sampled_minari_episodes(obs_space, act_space, lengths, ends)
    syn.write_minari(dataset_id, buffers, obs_space, act_space, **kw)
    return truth


@pytest.mark.parametrize("obs_kind", sorted(OBS_SPACES))
def test_observation_spaces_round_trip_exactly(tmp_path: Path, obs_kind: str):
    space = OBS_SPACES[obs_kind]
    truth = make("test/obs-v0", space, ACTION_SPACES["box"])
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/obs-v0")
    got = stored(tmp_path / "s.zarr")
    assert set(got[0].obs) == set(flatten_space(space))
    for g, t in zip(got, truth, strict=True):
        assert g.length == t.length
        for key, value in t.obs.items():
            assert g.obs[key].shape == (t.length + 1, *value.shape[1:])
            np.testing.assert_array_equal(g.obs[key], value)
    assert report.accounting()["balanced"]


@pytest.mark.parametrize("act_kind", sorted(ACTION_SPACES))
def test_action_spaces(tmp_path: Path, act_kind: str):
    space = ACTION_SPACES[act_kind]
    truth = make("test/act-v0", BOX, space)
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/act-v0")
    got = stored(tmp_path / "s.zarr")
    assert report.spec["action"]["kind"] == {"box": "continuous"}.get(act_kind, act_kind)
    for g, t in zip(got, truth, strict=True):
        np.testing.assert_array_equal(g.actions, t.actions)
        assert g.actions.dtype == (np.float32 if act_kind == "box" else np.int64)


def test_flags_boundaries_and_first_last_observations(tmp_path: Path):
    truth = make("test/flags-v0", BOX, ACTION_SPACES["discrete"])
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/flags-v0")
    got = stored(tmp_path / "s.zarr")
    for g, t in zip(got, truth, strict=True):
        np.testing.assert_array_equal(g.terminated, t.terminated)
        np.testing.assert_array_equal(g.truncated, t.truncated)
        np.testing.assert_array_equal(g.obs["observation"][0], t.obs["observation"][0])
        np.testing.assert_array_equal(g.obs["observation"][-1], t.obs["observation"][-1])
        assert g.rewards.dtype == np.float32 and g.source == "minari:test/flags-v0"
    assert (report.terminated, report.truncated, report.unfinished) == (1, 1, 1)
    assert report.adjustments["cast_float32:rewards"].episodes == 3  # Minari keeps float64 rewards


def test_episode_subset_and_metadata_filters(tmp_path: Path):
    make("test/sub-v0", BOX, ACTION_SPACES["discrete"], lengths=[2, 3, 4, 5], ends=["terminal"] * 4)
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/sub-v0", episodes=[1, 3])
    assert [g.length for g in stored(tmp_path / "s.zarr")] == [3, 4]
    assert (report.unselected_episodes, report.unselected_timesteps) == (2, 7) and report.accounting()["balanced"]
    report = run(
        tmp_path / "t.zarr", source="minari", dataset="test/sub-v0", filters={"metadata.id": [0, 3], "min_length": 3}
    )
    assert [g.meta["source_index"] for g in stored(tmp_path / "t.zarr")] == [3]
    assert report.filtered_episodes == 3 and report.accounting()["balanced"]
    assert stored(tmp_path / "s.zarr")[0].meta == {"source_index": 1}
    run(tmp_path / "u.zarr", source="minari", dataset="test/sub-v0", episodes=1, keep_episode_metadata=True)
    assert stored(tmp_path / "u.zarr")[0].meta == {"id": 0, "total_steps": 2, "source_index": 0}


def test_env_spec_is_recorded_without_needing_the_env(tmp_path: Path):
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    make("test/cartpole-v0", env.observation_space, env.action_space, env="CartPole-v1")
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/cartpole-v0")
    assert report.env_spec["id"] == "CartPole-v1"
    assert {g.env_name for g in stored(tmp_path / "s.zarr")} == {"CartPole-v1"}


def test_dataset_by_folder(tmp_path: Path, minari_root: Path):
    make("test/folder-v0", BOX, ACTION_SPACES["box"])
    run(tmp_path / "s.zarr", source="minari", path=str(minari_root / "test/folder-v0"))
    assert len(stored(tmp_path / "s.zarr")) == 3


def test_info_keys(tmp_path: Path):
    make("test/info-v0", BOX, ACTION_SPACES["box"])
    run(tmp_path / "s.zarr", source="minari", dataset="test/info-v0", info_keys=["step"])
    got = stored(tmp_path / "s.zarr")
    np.testing.assert_array_equal(got[1].obs["infos/step"], np.arange(7))
    with pytest.raises(DataError, match=r"info_keys: 'succes' is not in the infos .* has: step"):
        run(tmp_path / "t.zarr", source="minari", dataset="test/info-v0", info_keys=["succes"])


# ---- bad input -------------------------------------------------------------------------------------------------
def test_unknown_id_lists_local_ones_with_did_you_mean(tmp_path: Path):
    make("test/cartpole-v0", BOX, ACTION_SPACES["box"])
    with pytest.raises(
        DataError,
        match=r"unknown Minari dataset 'test/cartpol-v0' .*local datasets: test/cartpole-v0"
        r"\); did you mean 'test/cartpole-v0'\?",
    ):
        run(tmp_path / "s.zarr", source="minari", dataset="test/cartpol-v0")
    assert not (tmp_path / "s.zarr").exists()


def test_unsupported_space(tmp_path: Path):
    from minari.data_collector import EpisodeBuffer

    text = spaces.Text(5)
    buf = EpisodeBuffer(
        observations=["abc", "de", "f"],
        actions=np.zeros((2, 2), np.float32),
        rewards=np.zeros(2),
        terminations=np.array([False, True]),
        truncations=np.zeros(2, bool),
    )
    syn.write_minari("test/text-v0", [buf], text, ACTION_SPACES["box"])
    with pytest.raises(DataError, match=r"minari dataset 'test/text-v0': unsupported observation space Text"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/text-v0")


def _append_empty_episode(data_path: Path) -> None:
    """Add a zero-step episode by hand (minari's writer cannot write empty arrays; some real files have them)."""
    import json

    import h5py

    with h5py.File(data_path / "main_data.hdf5", "a") as f:
        group = f.create_group(f"episode_{len(f.keys())}")
        group.attrs.update(id=len(f.keys()) - 1, total_steps=0)
        group.create_dataset("observations", data=np.zeros((1, 3), np.float32))
        group.create_dataset("actions", shape=(0, 2), dtype=np.float32)
        for key in ("rewards", "terminations", "truncations"):
            group.create_dataset(key, shape=(0,), dtype=bool if key != "rewards" else np.float64)
    meta = json.loads((data_path / "metadata.json").read_text())
    meta["total_episodes"] += 1
    (data_path / "metadata.json").write_text(json.dumps(meta))


def test_zero_length_episode_is_an_error_unless_filtered(tmp_path: Path, minari_root: Path):
    make("test/empty-ep-v0", BOX, ACTION_SPACES["box"], lengths=[3], ends=["terminal"])
    _append_empty_episode(minari_root / "test/empty-ep-v0/data")
    with pytest.raises(DataError, match=r"episode 1 has no steps \(T=0; expected T >= 1\); .*min_length"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/empty-ep-v0")
    assert not (tmp_path / "s.zarr").exists()
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/empty-ep-v0", filters={"min_length": 1})
    assert report.episodes == 1 and report.filtered_episodes == 1


def test_empty_dataset(tmp_path: Path):
    syn.write_minari("test/empty-v0", [], BOX, ACTION_SPACES["box"])
    with pytest.raises(DataError, match=r"'test/empty-v0': the dataset has no episodes"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/empty-v0")


def test_nonfinite_observation_names_episode_and_key(tmp_path: Path):
    buffers, _ = syn.sampled_minari_episodes(BOX, ACTION_SPACES["box"], [3, 3], ["terminal"] * 2)
    buffers[1].observations[2, 1] = np.nan
    syn.write_minari("test/nan-v0", buffers, BOX, ACTION_SPACES["box"])
    with pytest.raises(DataError, match=r"episode 1: observations\['observation'\] has 1 non-finite .* at step 2"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/nan-v0")


def test_spec_that_disagrees_with_the_store(tmp_path: Path):
    make("test/a-v0", BOX, ACTION_SPACES["box"])
    make("test/b-v0", BOX, ACTION_SPACES["discrete"])
    run(tmp_path / "s.zarr", source="minari", dataset="test/a-v0")
    with pytest.raises(DataError, match=r"minari:test/b-v0 cannot go into store .*action"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/b-v0")
    assert len(stored(tmp_path / "s.zarr")) == 3


def test_episode_range_outside_the_dataset(tmp_path: Path):
    make("test/r-v0", BOX, ACTION_SPACES["box"])
    with pytest.raises(DataError, match=r"episodes: \[5, 9\) selects no episode .* inside \[0, 3\)"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/r-v0", episodes=[5, 9])
    with pytest.raises(ConfigError, match=r"episodes: expected a count or \[start, stop\]"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/r-v0", episodes=[5, 2])


def test_goals_from_obs_copies_goal_keys(tmp_path: Path):
    goal = spaces.Box(-5, 5, (2,), np.float32)
    space = spaces.Dict({"observation": BOX, "achieved_goal": goal, "desired_goal": goal})
    truth = make("test/goal-v0", space, ACTION_SPACES["box"])
    report = run(tmp_path / "s.zarr", source="minari", dataset="test/goal-v0", goals_from_obs=True)
    got = stored(tmp_path / "s.zarr")
    assert set(report.spec["goals"]) == {"achieved_goal", "desired_goal"}
    np.testing.assert_array_equal(got[1].goals["desired_goal"], truth[1].obs["desired_goal"])
    np.testing.assert_array_equal(got[1].obs["desired_goal"], truth[1].obs["desired_goal"])
    make("test/nogoal-v0", BOX, ACTION_SPACES["box"])
    with pytest.raises(
        DataError, match=r"goals_from_obs: .* no observation key\(s\) \['achieved_goal', 'desired_goal'\]"
    ):
        run(tmp_path / "t.zarr", source="minari", dataset="test/nogoal-v0", goals_from_obs=True)


def test_corrupt_minari_file(tmp_path: Path, minari_root: Path):
    make("test/corrupt-v0", BOX, ACTION_SPACES["box"])
    data = minari_root / "test/corrupt-v0/data/main_data.hdf5"
    data.write_bytes(data.read_bytes()[:2000])
    with pytest.raises(DataError, match=r"reading episode 0 failed .*truncated or corrupt"):
        run(tmp_path / "s.zarr", source="minari", dataset="test/corrupt-v0")
