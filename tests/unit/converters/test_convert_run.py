"""The conversion driver: idempotence, force, replacement, atomicity on failure/interrupt, reports, plugins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from amago_pipe.converters.base import Converter, SourceInfo
from amago_pipe.converters.run import convert
from converter_helpers import make_config, run, store_listing, stored

from amago_pipe.config.base import config
from amago_pipe.config.convert import SourceConfig
from amago_pipe.errors import ConfigError, DataError, Interrupted
from amago_pipe.spec import ActionSpec, ArraySpec, DataSpec
from amago_pipe.store import Episode, TrajectoryStore
from amago_pipe.store.tools import copy_store
from amago_pipe.testing import synthetic as syn


@pytest.fixture
def d4rl_file(tmp_path: Path, rng) -> Path:
    eps = [syn.continuous_episode(rng, n, e) for n, e in [(4, "terminal"), (5, "timeout"), (3, "terminal")]]
    return syn.write_d4rl_hdf5(tmp_path / "d.hdf5", eps)


def test_same_source_twice_is_a_noop(tmp_path: Path, d4rl_file: Path):
    first = run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file))
    before = store_listing(tmp_path / "s.zarr")
    again = run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file))
    assert again.status == "skipped" and again.timesteps == first.timesteps == 12
    assert "already_converted" in again.adjustments
    assert store_listing(tmp_path / "s.zarr") == before


def test_force_rewrites_and_drops_the_old_copy(tmp_path: Path, d4rl_file: Path):
    run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file))
    old = [s.id for s in TrajectoryStore.open(tmp_path / "s.zarr").segments("protected")]
    forced = run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file), force=True)
    segments = TrajectoryStore.open(tmp_path / "s.zarr").segments("protected")
    assert forced.status == "converted" and forced.replaced_segments == old
    assert [s.id for s in segments] != old and sum(s.timesteps for s in segments) == 12


def test_changed_options_replace_the_earlier_conversion_of_the_same_source(tmp_path: Path, d4rl_file: Path):
    run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file), episodes=1)
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file))
    assert "replaced_previous_conversion" in report.adjustments
    assert [e.length for e in stored(tmp_path / "s.zarr")] == [4, 5, 3]


def test_segments_carry_the_source_fingerprint(tmp_path: Path, d4rl_file: Path):
    report = run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file), partition="demos")
    (segment,) = TrajectoryStore.open(tmp_path / "s.zarr").segments("demos")
    assert segment.attrs["source_fingerprint"] == report.source_fingerprint
    assert segment.attrs["source"] == f"d4rl:{d4rl_file.resolve()}"


def test_filters_that_remove_everything_write_nothing(tmp_path: Path, d4rl_file: Path):
    with pytest.raises(DataError, match=r"nothing to write: all 3 episode\(s\) were removed by filters"):
        run(tmp_path / "s.zarr", source="d4rl", path=str(d4rl_file), filters={"min_return": 1e9})
    assert not (tmp_path / "s.zarr").exists()


def test_interrupt_leaves_the_partition_as_it_was(tmp_path: Path, d4rl_file: Path, rng):
    other = syn.write_d4rl_hdf5(tmp_path / "o.hdf5", [syn.continuous_episode(rng, 3, "terminal")] * 4)
    run(tmp_path / "s.zarr", source="d4rl", path=str(other))
    before = store_listing(tmp_path / "s.zarr")
    calls = iter(range(100))
    with pytest.raises(Interrupted, match=r"partition was left unchanged"):
        convert(
            make_config(source="d4rl", path=str(d4rl_file)),
            tmp_path / "s.zarr",
            should_stop=lambda: next(calls) >= 2,
            report_path=tmp_path / "r.json",
        )
    assert store_listing(tmp_path / "s.zarr") == before
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "interrupted"


def test_report_file_and_progress(tmp_path: Path, d4rl_file: Path):
    class Bar:
        def __init__(self) -> None:
            self.done, self.total = 0.0, None

        def advance(self, n: float = 1) -> None:
            self.done += n

        def update(self, *, completed=None, total=None, **fields) -> None:
            self.total = total if total is not None else self.total

    bar = Bar()
    convert(
        make_config(source="d4rl", path=str(d4rl_file)),
        tmp_path / "s.zarr",
        progress=bar,
        report_path=tmp_path / "out/report.json",
    )
    doc = json.loads((tmp_path / "out/report.json").read_text())
    assert doc["status"] == "converted" and doc["episodes"] == 3 and doc["accounting"]["balanced"]
    assert doc["episode_length"]["min"] == 3 and doc["endings"] == {"terminated": 2, "truncated": 1, "unfinished": 0}
    assert bar.done == 12 and bar.total == 12


@config
class TinyConfig(SourceConfig):
    """The plugin's own typed fields."""

    seed: int = 0
    """Changes the fingerprint."""


class TinyConverter(Converter):
    """A plugin converter: two fixed episodes."""

    Config = TinyConfig
    config: TinyConfig

    def open(self) -> SourceInfo:
        spec = DataSpec(observations={"x": ArraySpec((2,), "float32")}, action=ActionSpec("discrete", (), n=2))
        return SourceInfo(name="tiny", spec=spec, fingerprint=str(self.config.seed))

    def episodes(self, report) -> Iterator[Episode]:
        for i in range(2):
            yield Episode(
                obs={"x": np.zeros((4, 2), np.float32)},
                actions=np.array([0, 1, i]),
                rewards=np.ones(3, np.float32),
                terminated=np.array([0, 0, 1], bool),
                truncated=np.zeros(3, bool),
                meta={"source_index": i},
            )


def test_plugin_converter_by_import_path(tmp_path: Path):
    report = run(tmp_path / "s.zarr", source=f"{__name__}:TinyConverter", seed=1)
    assert report.episodes == 2 and report.returns.to_json()["mean"] == 3.0
    with pytest.raises(ConfigError, match=r"unknown key 'sead' .*did you mean 'seed'"):
        run(tmp_path / "t.zarr", source=f"{__name__}:TinyConverter", sead=1)
    with pytest.raises(ConfigError, match=r"'converter_helpers:run' is not a converter config"):
        run(tmp_path / "t.zarr", source="converter_helpers:run")


def test_a_source_stored_twice_is_settled_on_one_copy(tmp_path: Path, d4rl_file: Path):
    run(tmp_path / "a.zarr", source="d4rl", path=str(d4rl_file))
    run(tmp_path / "b.zarr", source="d4rl", path=str(d4rl_file))
    copy_store(TrajectoryStore.open(tmp_path / "a.zarr"), tmp_path / "b.zarr")  # now b holds the source twice
    ids = sorted(s.id for s in TrajectoryStore.open(tmp_path / "b.zarr").segments("protected"))
    assert len(ids) == 2
    again = run(tmp_path / "b.zarr", source="d4rl", path=str(d4rl_file))
    assert again.status == "skipped" and again.timesteps == 12
    assert [s.id for s in TrajectoryStore.open(tmp_path / "b.zarr").segments("protected")] == ids[:1]
