"""Creating and opening stores: format version, spec compatibility, codecs, partition configuration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from amago_pipe.errors import DataError, StoreFormatError
from amago_pipe.spec import DataSpec
from amago_pipe.store import FORMAT_VERSION, TrajectoryStore
from amago_pipe.testing.episodes import assert_episodes_equal, example_specs, random_episode

SPECS = example_specs()
BOX = SPECS["box"]


def test_root_attributes_carry_format_spec_and_creation(tmp_path: Path) -> None:
    TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    doc = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())
    info = doc["attributes"]["amago_pipe_store"]
    assert doc["zarr_format"] == 3 and info["format_version"] == FORMAT_VERSION
    assert info["spec"] == BOX.to_json() and info["codec"] == "lz4"
    assert {"time", "amago_pipe", "zarr", "numpy"} <= set(info["created"])
    assert TrajectoryStore.exists(tmp_path / "s.zarr") and not TrajectoryStore.exists(tmp_path / "nope")


def test_open_missing_and_foreign_paths(tmp_path: Path) -> None:
    with pytest.raises(StoreFormatError, match=r"no trajectory store here \(no zarr.json\)"):
        TrajectoryStore.open(tmp_path / "missing.zarr")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / ".zgroup").write_text('{"zarr_format": 2}')
    with pytest.raises(StoreFormatError, match="found a zarr v2 '.zgroup'; this store needs zarr v3"):
        TrajectoryStore.open(tmp_path / "v2")
    import zarr

    zarr.create_group(str(tmp_path / "plain.zarr"))
    with pytest.raises(StoreFormatError, match="a zarr group but not an amago-pipe trajectory store"):
        TrajectoryStore.open(tmp_path / "plain.zarr")


def test_newer_format_is_refused(tmp_path: Path) -> None:
    TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    path = tmp_path / "s.zarr" / "zarr.json"
    doc = json.loads(path.read_text())
    doc["attributes"]["amago_pipe_store"]["format_version"] = FORMAT_VERSION + 1
    path.write_text(json.dumps(doc))
    with pytest.raises(
        StoreFormatError, match=f"format version {FORMAT_VERSION + 1} is newer than this amago-pipe reads"
    ):
        TrajectoryStore.open(tmp_path / "s.zarr")


def test_create_refuses_existing_store_and_non_empty_dir(tmp_path: Path) -> None:
    TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with pytest.raises(StoreFormatError, match="a store already exists here; pass exist_ok=True"):
        TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "file.txt").write_text("x")
    with pytest.raises(StoreFormatError, match="exists and is not empty but holds no zarr store"):
        TrajectoryStore.create(tmp_path / "junk", BOX)


def test_exist_ok_checks_action_and_goal_fields(tmp_path: Path) -> None:
    TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    with pytest.raises(DataError, match=r"action: store at .* has continuous\(2,\), the given spec has discrete\(3\)"):
        TrajectoryStore.create(tmp_path / "s.zarr", DataSpec(BOX.observations, SPECS["discrete"].action), exist_ok=True)
    goals = SPECS["goals"]
    TrajectoryStore.create(tmp_path / "g.zarr", goals)
    with pytest.raises(DataError, match="goal fields differ"):
        TrajectoryStore.create(tmp_path / "g.zarr", BOX, exist_ok=True)


@pytest.mark.parametrize("codec", ["lz4", "none"])
def test_other_codecs_round_trip(tmp_path: Path, codec: str) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX, codec=codec)
    ep = random_episode(BOX, 9, np.random.default_rng(0))
    with store.writer("protected") as w:
        w.add(ep)
    assert_episodes_equal(ep, next(TrajectoryStore.open(tmp_path / "s.zarr").iter_episodes("protected")))


def test_unknown_codec_and_bad_names(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="unknown codec 'zstdd' .*did you mean 'zstd'"):
        TrajectoryStore.create(tmp_path / "s.zarr", BOX, codec="zstdd")
    store = TrajectoryStore.create(tmp_path / "t.zarr", BOX)
    with pytest.raises(DataError, match="invalid partition name 'my part'"):
        store.writer("my part")
    with pytest.raises(DataError, match="unknown partition kind 'fif'.*did you mean 'fifo'"):
        store.configure_partition("x", kind="fif")  # type: ignore[arg-type]
    with pytest.raises(DataError, match="capacity_timesteps applies to fifo partitions only, not protected"):
        store.configure_partition("protected", capacity_timesteps=10)
    with pytest.raises(DataError, match="no partition 'fifo' .*partitions: none"):
        store.partition_info("fifo")


def test_configure_partition_persists_and_shrinks(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    rng = np.random.default_rng(0)
    for _ in range(4):
        with store.writer("online") as w:
            w.add(random_episode(BOX, 10, rng))
    assert store.partition_info("online").kind == "plain"
    store.configure_partition("online", kind="fifo", capacity_timesteps=25)
    info = TrajectoryStore.open(tmp_path / "s.zarr").partition_info("online")
    assert (info.kind, info.capacity_timesteps, info.timesteps) == ("fifo", 25, 20)


def test_fifo_writer_caps_segment_size_to_an_eighth_of_capacity(tmp_path: Path) -> None:
    store = TrajectoryStore.create(tmp_path / "s.zarr", BOX)
    store.configure_partition("fifo", capacity_timesteps=80)
    rng = np.random.default_rng(0)
    with store.writer("fifo", segment_timesteps=1000) as w:
        for _ in range(6):
            w.add(random_episode(BOX, 5, rng))
    assert [s.timesteps for s in store.segments("fifo")] == [10, 10, 10]


def test_chunks_hold_a_megabyte_of_rows_and_at_least_a_window_of_frames() -> None:
    from amago_pipe.store.format import MIN_CHUNK_ROWS, chunk_rows

    assert chunk_rows(17 * 4) == 8192  # vector rows: ~1 MB (a power of two)
    assert chunk_rows(84 * 84 * 4) == MIN_CHUNK_ROWS == 256  # frame stacks: 256 of them, 7.2 MB, not 32
    assert chunk_rows(84 * 84 * 4, expected_rows=50) == 64  # never longer than the segment expected
