"""AMAGO buffer converter: npz layout, one-hot actions, pieces, sub-folders, refused pickles, bad files."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from converter_helpers import run, stored

from amago_pipe.errors import DataError
from amago_pipe.testing import synthetic as syn


def discrete_episode(rng: np.random.Generator, length: int, end: str) -> syn.TrueEpisode:
    ep = syn.continuous_episode(rng, length, end)
    ep.actions = rng.integers(0, 4, length)
    return ep


def test_discrete_one_hot_actions_become_ids(tmp_path: Path, rng):
    truth = [discrete_episode(rng, n, "terminal") for n in (3, 5)]
    for i, ep in enumerate(truth):
        syn.write_amago_npz(tmp_path / "run/buffer/protected", ep, discrete_n=4, unix_time=100 + i)
    report = run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path / "run"))
    got = stored(tmp_path / "s.zarr")
    assert report.spec["action"] == {**report.spec["action"], "kind": "discrete", "n": 4}
    for g, t in zip(got, truth, strict=True):
        np.testing.assert_array_equal(g.actions, t.actions)
        np.testing.assert_array_equal(g.obs["observation"], t.obs["observation"])
        np.testing.assert_array_equal(g.rewards, t.rewards)
        assert g.terminated[-1] and not g.truncated.any() and g.env_name == "toy"
    assert "action_kind_inferred" in report.adjustments and report.accounting()["balanced"]


def test_continuous_pieces_and_both_subfolders_in_time_order(tmp_path: Path, rng):
    first = syn.continuous_episode(rng, 4, "none")
    second = syn.continuous_episode(rng, 3, "terminal")
    syn.write_amago_npz(tmp_path / "buffer/fifo", second, time_start=4, unix_time=200)
    syn.write_amago_npz(tmp_path / "buffer/protected", first, unix_time=300)
    report = run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path))
    got = stored(tmp_path / "s.zarr")
    assert [g.meta["buffer"] for g in got] == ["protected", "fifo"]
    assert [g.time_start for g in got] == [0, 4]
    np.testing.assert_array_equal(got[0].actions, first.actions)
    assert report.spec["action"]["kind"] == "continuous" and report.spec["action"]["low"] == [-1.0, -1.0]
    assert report.adjustments["piece_of_longer_episode"].episodes == 1
    assert report.adjustments["ends_without_terminal"].episodes == 1
    run(tmp_path / "t.zarr", source="amago-buffer", path=str(tmp_path), buffer_partitions=["fifo"])
    assert [g.length for g in stored(tmp_path / "t.zarr")] == [3]


def test_flat_folder_and_episode_subset(tmp_path: Path, rng):
    for i in range(4):
        syn.write_amago_npz(tmp_path / "flat", syn.continuous_episode(rng, 2 + i, "terminal"), unix_time=10 + i)
    report = run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path / "flat"), episodes=2)
    assert [g.length for g in stored(tmp_path / "s.zarr")] == [2, 3]
    assert (report.unselected_episodes, report.unselected_timesteps) == (2, 9) and report.accounting()["balanced"]


def test_traj_pickles_are_refused(tmp_path: Path, rng):
    folder = tmp_path / "buffer/protected"
    syn.write_amago_npz(folder, syn.continuous_episode(rng, 2, "terminal"))
    (folder / "toy_abc_1.traj").write_bytes(pickle.dumps({"not": "loaded"}))
    with pytest.raises(DataError, match=r"1 \.traj file\(s\) \(e\.g\. toy_abc_1\.traj\) are pickles.*refused"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path))


def test_object_arrays_are_not_unpickled(tmp_path: Path):
    folder = tmp_path / "flat"
    folder.mkdir()
    np.savez(
        folder / "toy_x_1.npz",
        actions=np.array([{"a": 1}], dtype=object),
        rews=np.zeros((1, 1)),
        dones=np.zeros((1, 1), bool),
        _OBS_KEY_observation=np.zeros((2, 3)),
    )
    with pytest.raises(DataError, match=r"holds pickled \(object\) arrays, which are refused"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(folder))


def test_mismatched_lengths_and_corrupt_files(tmp_path: Path, rng):
    folder = tmp_path / "flat"
    path = syn.write_amago_npz(folder, syn.continuous_episode(rng, 3, "terminal"), unix_time=1)
    with np.load(path) as z:
        arrays = dict(z)
    arrays["rews"] = arrays["rews"][:2]
    np.savez(path, **arrays)
    with pytest.raises(DataError, match=r"mismatched length: .*actions has 3 rows, expected 2"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(folder))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DataError, match=r"not a readable \.npz file .*truncated or corrupt"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(folder))


def test_discrete_kind_rejects_non_one_hot_rows(tmp_path: Path, rng):
    syn.write_amago_npz(tmp_path / "flat", syn.continuous_episode(rng, 3, "terminal"))
    with pytest.raises(DataError, match=r"actions are not one-hot rows.*set action_kind"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path / "flat"), action_kind="discrete")


def test_empty_or_missing_folder(tmp_path: Path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \.npz trajectory files found"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path / "empty"))
    with pytest.raises(DataError, match=r"no such folder; expected an AMAGO dataset folder"):
        run(tmp_path / "s.zarr", source="amago-buffer", path=str(tmp_path / "nope"))
