"""The one Minari writer, with real minari: staged all-or-nothing writes, lossless round trips through the Minari
converter, datasets it did not make left alone, and one writer per dataset id."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import h5py
import minari
import numpy as np
import pytest
from amago_pipe.converters import minari_writer
from amago_pipe.converters.minari_writer import (
    OWN_MARKS,
    check_dataset_target,
    dataset_fingerprint,
    dataset_lock,
    minari_dataset_path,
    write_minari_dataset,
)
from amago_pipe.converters.to_minari import export_to_minari
from converter_helpers import run, stored
from gymnasium import spaces

from amago_pipe.errors import ConfigError, DataError, LockError
from amago_pipe.hashing import hash_tree
from amago_pipe.spec import from_spaces
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.testing import synthetic as syn
from amago_pipe.testing.episodes import assert_episodes_equal

OBS = spaces.Dict({"pos": spaces.Box(-1, 1, (2,), np.float32), "step": spaces.Discrete(100)})
ACT = spaces.Box(-1, 1, (2,), np.float32)


def episode(rng: np.random.Generator, length: int, index: int) -> Episode:
    """A collected-looking episode of OBS/ACT, with its own env name, source, time start and metadata."""
    return Episode(
        obs={"pos": rng.uniform(-1, 1, (length + 1, 2)).astype(np.float32), "step": np.arange(length + 1)},
        actions=rng.uniform(-1, 1, (length, 2)).astype(np.float32),
        rewards=rng.standard_normal(length).astype(np.float32),
        terminated=np.arange(length) == length - 1,
        truncated=np.zeros(length, bool),
        env_name="toy",
        source="collect:random+noise0.1",
        time_start=3 * index,
        meta={"policy": "random", "noise": 0.1, "index": index},
    )


@pytest.mark.parametrize("how", ["collected", "exported"])
def test_written_datasets_convert_back_losslessly(tmp_path: Path, rng: np.random.Generator, how: str):
    episodes = [episode(rng, length, i) for i, length in enumerate([5, 1, 7])]
    if how == "collected":  # what the collect stage does
        with dataset_lock("toy/back-v0", where="test"):
            check_dataset_target("toy/back-v0", replace=False, where="test")
            path = write_minari_dataset("toy/back-v0", iter(episodes), observation_space=OBS, action_space=ACT)
    else:
        with TrajectoryStore.create(tmp_path / "a.zarr", from_spaces(OBS, ACT)).writer("protected") as writer:
            for ep in episodes:
                writer.add(ep)
        summary = export_to_minari(tmp_path / "a.zarr", "protected", "toy/back-v0")
        assert (summary["episodes"], summary["timesteps"]) == (3, 13)
        path = Path(summary["path"])
    assert path == minari_dataset_path("toy/back-v0") and dataset_fingerprint(path) == hash_tree(path)[:16]
    dataset = minari.load_dataset("toy/back-v0")
    assert (dataset.observation_space, dataset.action_space) == (OBS, ACT)
    assert dataset.storage.metadata["algorithm_name"] == minari_writer.MARK
    run(tmp_path / "b.zarr", source="minari", dataset="toy/back-v0")
    for a, b in zip(episodes, stored(tmp_path / "b.zarr"), strict=True):
        assert_episodes_equal(a, b)


def test_a_write_failing_midway_leaves_nothing_behind(
    monkeypatch: pytest.MonkeyPatch, minari_root: Path, rng: np.random.Generator
):
    monkeypatch.setattr(minari_writer, "BATCH_TIMESTEPS", 5)  # a batch every second episode
    write_minari_dataset("toy/keep-v0", [episode(rng, 4, i) for i in range(2)], observation_space=OBS, action_space=ACT)
    before = dataset_fingerprint(minari_dataset_path("toy/keep-v0"))
    staged: list[int] = []

    def failing() -> Iterator[Episode]:
        for i in range(6):
            yield episode(rng, 4, i)
        (data,) = minari_root.glob(".amago-pipe/staging/*/toy/*/data/main_data.hdf5")
        with h5py.File(data, "r") as f:
            staged.append(len(f))  # three batches were already written, to the staging folder
        raise RuntimeError("the source broke")

    for dataset_id in ("toy/new-v0", "toy/keep-v0"):
        with pytest.raises(RuntimeError, match="the source broke"):
            write_minari_dataset(dataset_id, failing(), observation_space=OBS, action_space=ACT)
    with pytest.raises(DataError, match="no episodes to write to Minari dataset 'toy/empty-v0'"):
        write_minari_dataset("toy/empty-v0", [], observation_space=OBS, action_space=ACT)
    assert staged == [6, 6]
    assert dataset_fingerprint(minari_dataset_path("toy/keep-v0")) == before  # the old dataset stays as it was
    assert list(minari.list_local_datasets()) == ["toy/keep-v0"]
    work = minari_root / minari_writer.WORK_DIR
    assert [p for p in work.rglob("*") if p.is_file() and p.suffix != ".lock"] == []


def test_a_dataset_amago_pipe_did_not_make_is_never_replaced(tmp_path: Path, minari_root: Path):
    obs_space, act_space = spaces.Box(-1, 1, (3,), np.float32), spaces.Discrete(3)
    buffers, _ = syn.sampled_minari_episodes(obs_space, act_space, [3, 2], ["terminal", "timeout"])
    syn.write_minari("src/foreign-v0", buffers, obs_space, act_space)  # algorithm_name 'synthetic'
    before = dataset_fingerprint(minari_dataset_path("src/foreign-v0"))
    with pytest.raises(
        ConfigError, match=r"made by amago-pipe \(algorithm_name 'synthetic'\), so it is never replaced"
    ):
        check_dataset_target("src/foreign-v0", replace=True, where="collect.dataset_id")
    run(tmp_path / "a.zarr", source="minari", dataset="src/foreign-v0")
    with pytest.raises(DataError, match=r"--dataset-id: .* so it is never replaced"):
        export_to_minari(tmp_path / "a.zarr", "protected", "src/foreign-v0", force=True)
    assert dataset_fingerprint(minari_dataset_path("src/foreign-v0")) == before
    for i, mark in enumerate(OWN_MARKS):  # today's mark and the two older ones are all ours
        meta = minari_root / "own" / f"d{i}-v0" / "data" / "metadata.json"
        meta.parent.mkdir(parents=True)
        meta.write_text(json.dumps({"algorithm_name": mark}))
        check_dataset_target(f"own/d{i}-v0", replace=True, where="collect.dataset_id")
        with pytest.raises(ConfigError, match=r"^collect.dataset_id: .* set `replace: true` \(or --overwrite\)"):
            check_dataset_target(f"own/d{i}-v0", replace=False, where="collect.dataset_id")


HOLD_LOCK = """
import sys
from amago_pipe.converters.minari_writer import dataset_lock

with dataset_lock("toy/busy-v0", where="first"):
    print("locked", flush=True)
    sys.stdin.readline()
"""


def test_a_second_writer_of_one_id_gets_a_lock_error(tmp_path: Path, rng: np.random.Generator):
    with TrajectoryStore.create(tmp_path / "a.zarr", from_spaces(OBS, ACT)).writer("protected") as writer:
        writer.add(episode(rng, 3, 0))
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        busy = rf"Minari dataset 'toy/busy-v0' is being written by another amago-pipe .* \(pid {holder.pid}\)"
        with pytest.raises(LockError, match=rf"^second: {busy}"), dataset_lock("toy/busy-v0", where="second"):
            pass
        with pytest.raises(LockError, match=rf"^--dataset-id: {busy}"):
            export_to_minari(tmp_path / "a.zarr", "protected", "toy/busy-v0")
    finally:
        holder.communicate("\n", timeout=60)
    assert not minari_dataset_path("toy/busy-v0").exists()
    export_to_minari(tmp_path / "a.zarr", "protected", "toy/busy-v0")  # released: free to write
    assert minari.load_dataset("toy/busy-v0").total_episodes == 1
