"""D4RL HDF5 converter: boundaries, last observations, overlapping flags, infos, quirks, bad files."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
from converter_helpers import run, store_listing, stored

from amago_pipe.errors import DataError
from amago_pipe.testing import synthetic as syn

LAYOUT = [(5, "terminal"), (7, "timeout"), (3, "both"), (4, "none")]


def episodes(rng: np.random.Generator, layout=LAYOUT, info_dim: int = 0) -> list[syn.TrueEpisode]:
    return [syn.continuous_episode(rng, n, end, info_dim=info_dim) for n, end in layout]


def kinds(report) -> set[str]:
    return set(report.adjustments)


def test_with_next_observations_is_lossless(tmp_path: Path, rng):
    truth = episodes(rng)
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", truth)
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    got = stored(tmp_path / "s.zarr")
    assert [g.length for g in got] == [5, 7, 3, 4]
    for g, t in zip(got, truth, strict=True):
        np.testing.assert_array_equal(g.obs["observation"], t.obs["observation"])
        np.testing.assert_array_equal(g.actions, t.actions)
        np.testing.assert_array_equal(g.rewards, t.rewards)
        np.testing.assert_array_equal(g.terminated, t.terminated)
        np.testing.assert_array_equal(g.truncated, t.truncated)
    assert report.accounting()["balanced"] and report.dropped_timesteps == 0
    assert (report.terminated, report.truncated, report.unfinished) == (2, 1, 1)
    assert report.both_flags_steps == 1 and "terminal_and_timeout" in kinds(report)
    assert "trailing_unfinished" in kinds(report)


def test_without_next_observations_repeats_after_terminal_and_drops_after_timeout(tmp_path: Path, rng):
    truth = episodes(rng)
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", truth, next_observations=False)
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    got = stored(tmp_path / "s.zarr")
    assert [g.length for g in got] == [5, 6, 3, 3]
    term = got[0]
    np.testing.assert_array_equal(term.obs["observation"][:-1], truth[0].obs["observation"][:-1])
    np.testing.assert_array_equal(term.obs["observation"][-1], term.obs["observation"][-2])
    assert term.terminated[-1] and not term.truncated[-1]
    timeout = got[1]
    np.testing.assert_array_equal(timeout.obs["observation"], truth[1].obs["observation"][:-1])
    assert timeout.truncated[-1] and not timeout.truncated[:-1].any() and not timeout.terminated.any()
    assert not got[3].terminated[-1] and not got[3].truncated[-1]
    assert report.adjustments["last_step_dropped"].dropped_timesteps == 2
    assert report.adjustments["last_obs_repeated_terminal"].episodes == 2
    acc = report.accounting()
    assert acc["balanced"] and acc["dropped"] == 2 and acc["written"] == 17


def test_repeat_last_obs_keeps_every_step(tmp_path: Path, rng):
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", episodes(rng), next_observations=False)
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path), repeat_last_obs=True)
    assert [g.length for g in stored(tmp_path / "s.zarr")] == [5, 7, 3, 4]
    assert report.dropped_timesteps == 0 and "last_obs_repeated_non_terminal" in kinds(report)


def test_one_step_timeout_without_next_obs_is_dropped_and_counted(tmp_path: Path, rng):
    path = syn.write_d4rl_hdf5(
        tmp_path / "d.hdf5", episodes(rng, [(1, "timeout"), (4, "terminal")]), next_observations=False
    )
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    assert [g.length for g in stored(tmp_path / "s.zarr")] == [4]
    assert report.adjustments["episode_dropped_one_step"].episodes == 1
    assert report.accounting()["balanced"] and report.dropped_timesteps == 1


def test_unflagged_discontinuity_splits_the_episode(tmp_path: Path, rng):
    a, b = episodes(rng, [(4, "none"), (3, "timeout")])
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", [a, b])
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    got = stored(tmp_path / "s.zarr")
    assert [g.length for g in got] == [4, 3]
    np.testing.assert_array_equal(got[0].obs["observation"], a.obs["observation"])
    assert report.adjustments["split_at_discontinuity"].episodes == 1
    joined = run(tmp_path / "t.zarr", source="d4rl", path=str(path), split_on_discontinuity=False)
    assert [g.length for g in stored(tmp_path / "t.zarr")] == [7] and "split_at_discontinuity" not in kinds(joined)


def test_no_timeouts_array_splits_on_terminals_only(tmp_path: Path, rng):
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", episodes(rng, [(3, "terminal"), (4, "terminal")]), timeouts=False)
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    assert [g.length for g in stored(tmp_path / "s.zarr")] == [3, 4] and "no_timeouts" in kinds(report)


def test_info_keys_become_observation_keys(tmp_path: Path, rng):
    truth = episodes(rng, [(3, "terminal"), (2, "timeout")], info_dim=2)
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", truth)
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path), info_keys=["goal"])
    got = stored(tmp_path / "s.zarr")
    goal = got[0].obs["infos/goal"]
    np.testing.assert_array_equal(goal[:-1], truth[0].infos["goal"][:-1])
    np.testing.assert_array_equal(goal[-1], goal[-2])
    assert "info_last_row_repeated:infos/goal" in kinds(report)


def test_episode_subset_accounts_for_every_row(tmp_path: Path, rng):
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", episodes(rng))
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path), episodes=[1, 3])
    assert [g.length for g in stored(tmp_path / "s.zarr")] == [7, 3]
    assert report.unselected_episodes == 2 and report.unselected_timesteps == 9
    assert report.accounting()["balanced"] and report.source_episodes == 4


def test_quirky_dtypes_and_shapes(tmp_path: Path, rng):
    truth = episodes(rng, [(3, "terminal"), (2, "timeout")])
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", truth)
    with h5py.File(path, "a") as f:  # float flags, (N, 1) rewards in float64, as some real files have
        for key in ("terminals", "timeouts"):
            values = f[key][()].astype(np.float32)
            del f[key]
            f[key] = values
        rewards = f["rewards"][()].astype(np.float64)[:, None]
        del f["rewards"]
        f["rewards"] = rewards
    run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    got = stored(tmp_path / "s.zarr")
    assert got[0].terminated.dtype == bool and got[1].truncated[-1]
    np.testing.assert_array_equal(got[0].rewards, truth[0].rewards)


def test_integer_actions_are_discrete(tmp_path: Path, rng):
    truth = episodes(rng, [(3, "terminal"), (2, "timeout")])
    actions = np.array([0, 2, 1, 2, 0])
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", truth)
    with h5py.File(path, "a") as f:
        del f["actions"]
        f["actions"] = actions
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    assert report.spec["action"]["kind"] == "discrete" and report.spec["action"]["n"] == 3
    np.testing.assert_array_equal(np.concatenate([g.actions for g in stored(tmp_path / "s.zarr")]), actions)


# ---- bad input -------------------------------------------------------------------------------------------------
def _good(tmp_path: Path, rng) -> Path:
    return syn.write_d4rl_hdf5(tmp_path / "d.hdf5", episodes(rng))


def test_missing_array_is_named(tmp_path: Path, rng):
    path = _good(tmp_path, rng)
    with h5py.File(path, "a") as f:
        del f["terminals"]
    with pytest.raises(DataError, match=r"missing D4RL array\(s\) terminals"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    assert not (tmp_path / "s.zarr").exists()


def test_nested_observations_are_not_d4rl(tmp_path: Path, rng):
    path = _good(tmp_path, rng)
    with h5py.File(path, "a") as f:
        del f["observations"]
        f.create_dataset("observations/agent", data=np.zeros((19, 2)))
    with pytest.raises(DataError, match=r"observations is a group \(nested arrays\), not one array"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path))


def test_mismatched_lengths_are_named(tmp_path: Path, rng):
    path = _good(tmp_path, rng)
    with h5py.File(path, "a") as f:
        short = f["actions"][:-2]
        del f["actions"]
        f["actions"] = short
    with pytest.raises(DataError, match=r"mismatched length: observations has 19 rows but actions has 17 rows"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path))


def test_truncated_file(tmp_path: Path, rng):
    path = _good(tmp_path, rng)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(DataError, match=r"cannot be opened as HDF5 .*truncated, corrupt or not HDF5"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path))


def test_not_hdf5_and_missing_file(tmp_path: Path):
    (tmp_path / "x.hdf5").write_text("hello")
    with pytest.raises(DataError, match=r"cannot be opened as HDF5"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(tmp_path / "x.hdf5"))
    with pytest.raises(DataError, match=r"no such file; expected a D4RL .hdf5 file"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(tmp_path / "nope.hdf5"))


def test_empty_dataset(tmp_path: Path):
    with h5py.File(tmp_path / "e.hdf5", "w") as f:
        for key, shape in {"observations": (0, 3), "actions": (0, 2), "rewards": (0,), "terminals": (0,)}.items():
            f.create_dataset(key, shape=shape, dtype=np.float32)
    with pytest.raises(DataError, match=r"the dataset is empty \(observations has 0 rows\)"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(tmp_path / "e.hdf5"))


def test_flags_that_are_not_boolean(tmp_path: Path, rng):
    path = _good(tmp_path, rng)
    with h5py.File(path, "a") as f:
        flags = f["terminals"][()].astype(np.float32)
        flags[2] = 2.0
        del f["terminals"]
        f["terminals"] = flags
    with pytest.raises(DataError, match=r"terminals holds values other than 0/1 \(e.g. rows \[2\]"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path))


def test_nonfinite_values_fail_unless_allowed(tmp_path: Path, rng):
    path = _good(tmp_path, rng)
    with h5py.File(path, "a") as f:
        f["rewards"][6] = np.nan
    with pytest.raises(DataError, match=r"episode 1: rewards has 1 non-finite value\(s\).*first at step 1"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path))
    assert not (tmp_path / "s.zarr").exists()
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(path), allow_nonfinite=True)
    assert report.rewards.nonfinite == 1 and "nonfinite_kept:rewards" in kinds(report)


def test_unknown_info_key_lists_the_present_ones(tmp_path: Path, rng):
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", episodes(rng, info_dim=1))
    with pytest.raises(DataError, match=r"info_keys: 'qpos' is not in .* the file has: infos/goal"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path), info_keys=["qpos"])


def test_failure_leaves_an_existing_store_untouched(tmp_path: Path, rng):
    good = _good(tmp_path, rng)
    run(tmp_path / "s.zarr", source="d4rl", path=str(good))
    before = store_listing(tmp_path / "s.zarr")
    bad = syn.write_d4rl_hdf5(tmp_path / "bad.hdf5", episodes(rng))
    with h5py.File(bad, "a") as f:
        f["observations"][15, 0] = np.inf
    with pytest.raises(DataError, match=r"episode 3: observations\['observation'\] has 1 non-finite"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(bad))
    assert store_listing(tmp_path / "s.zarr") == before


@pytest.mark.parametrize("key", ["observations", "infos/name"])
def test_string_arrays_are_refused_before_anything_is_written(tmp_path: Path, rng, key: str):
    path = syn.write_d4rl_hdf5(tmp_path / "d.hdf5", episodes(rng))
    with h5py.File(path, "a") as f:
        n = len(f["rewards"])
        if key in f:
            del f[key]
        f[key] = np.array([[b"x"]] * n, dtype="S1")
    with pytest.raises(DataError, match=rf"d.hdf5: {key}: dtype \|S1 \(byte strings\) cannot be stored"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(path), info_keys=["name"] if key != "observations" else [])
    assert not (tmp_path / "s.zarr").exists()
