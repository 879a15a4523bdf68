"""Smaller pieces: the stage config's checks, episode selection/filters, float casts, the report, fingerprints."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from amago_pipe.converters.base import EpisodeFilter, EpisodeSelection, ending, to_float32
from amago_pipe.converters.episode_stats import RunningStats
from amago_pipe.converters.report import ConversionReport, render
from converter_helpers import make_config

from amago_pipe.config.build import Problems, build
from amago_pipe.config.convert import ConvertStageConfig
from amago_pipe.errors import ConfigError
from amago_pipe.store import Episode


def episode(rewards: list[float], *, end: str = "terminated", meta: dict | None = None) -> Episode:
    n = len(rewards)
    term, trunc = np.zeros(n, bool), np.zeros(n, bool)
    if end == "terminated":
        term[-1] = True
    elif end == "truncated":
        trunc[-1] = True
    return Episode(
        obs={"x": np.zeros((n + 1, 2), np.float32)},
        actions=np.zeros((n, 1), np.float32),
        rewards=np.asarray(rewards, np.float32),
        terminated=term,
        truncated=trunc,
        meta=meta or {},
    )


D4RL = {"type": "d4rl", "path": "f"}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"source": {"type": "minary", "dataset": "x"}}, r"source.type: unknown converter 'minary'.*'minari'\?"),
        ({"source": {"type": "minari"}}, r"source.dataset: source 'minari' needs `dataset:`"),
        ({"source": {"type": "d4rl"}}, r"source.path: missing required key 'path'"),
        ({"source": D4RL, "episodes": 0}, r"episodes: a count of episodes must be >= 1"),
        ({"source": D4RL, "filters": {"min_lenght": 2}}, r"unknown filter 'min_lenght' .*'min_length'"),
        ({"source": D4RL, "filters": {"ends": "timeout"}}, r"filters.ends: expected one or a list of"),
        ({"source": D4RL, "filters": {"min_return": "x"}}, r"filters.min_return: expected a number"),
        ({"source": {**D4RL, "action_kind": "discrete"}}, r"source.action_kind: unknown key 'action_kind' for conv"),
        ({"source": {**D4RL, "goals_from_obs": True}}, r"unknown key 'goals_from_obs'"),
        ({"source": {"type": "amago-buffer", "path": "d", "action_kind": "discrate"}}, r"expected one of .*'discrete'"),
        ({"source": {"type": "minari", "dataset": "a/b-v0", "info_key": ["x"]}}, r"did you mean 'info_keys'\?"),
        ({"source": D4RL, "sorce": 1}, r"unknown key 'sorce' .*did you mean 'source'\?"),
        ({"source": {"type": "amago_pipe.converters.base:EpisodeFilter"}}, r"is not a converter config"),
    ],
)
def test_config_errors_name_the_field(data: dict, message: str):
    with pytest.raises(ConfigError, match=message):
        make_config(**data)


def test_the_old_flat_form_names_the_new_one():
    with pytest.raises(ConfigError, match=r"`source: d4rl` .* old form.*`source: \{type: d4rl, path: f, info_keys"):
        make_config(**{"source": "d4rl", "path": "f", "info_keys": ["a"]}, _raw=True)


def test_config_builds_inside_a_stage_mapping():
    problems = Problems()
    cfg = build(
        ConvertStageConfig,
        {
            "type": "convert",
            "source": {"type": "minari", "dataset": "a/b-v0", "goals_from_obs": True},
            "episodes": [0, 10],
            "filters": {"metadata.seed": 3},
        },
        problems,
    )
    assert not problems.items and cfg.episodes == [0, 10] and cfg.partition == "protected"
    assert cfg.implementation().__name__ == "ConvertStage"
    assert cfg.source.goals_from_obs and cfg.source.implementation().__name__ == "MinariConverter"


def test_selection():
    assert 4 in EpisodeSelection(None) and EpisodeSelection(None).bounds(7) == (0, 7)
    first = EpisodeSelection(3)
    assert 2 in first and 3 not in first and first.past_end(3) and first.bounds(2) == (0, 2)
    span = EpisodeSelection([2, 5])
    assert 1 not in span and 4 in span and span.bounds(10) == (2, 5) and span.describe() == "[2, 5)"


def test_filters():
    ep = episode([1.0, 2.0, 3.0], meta={"seed": np.int64(4), "task": {"level": "hard"}})
    assert EpisodeFilter({"min_length": 3, "max_return": 6, "ends": "terminated"}).accepts(ep)
    assert not EpisodeFilter({"min_return": 6.5}).accepts(ep)
    assert EpisodeFilter({"metadata.seed": [1, 4], "metadata.task.level": "hard"}).accepts(ep)
    assert not EpisodeFilter({"metadata.missing": 1}).accepts(ep)
    assert ending(episode([1.0], end="truncated")) == "truncated" and ending(episode([1.0], end="")) == "unfinished"


def test_float_casts_are_reported_only_when_lossy():
    report = ConversionReport(source="t")
    out = to_float32(np.array([0.5, 1.0]), what="rewards", report=report, index=0)
    assert out.dtype == np.float32 and not report.adjustments
    to_float32(np.array([0.1]), what="rewards", report=report, index=3)
    adj = report.adjustments["cast_float32:rewards"]
    assert adj.examples == [3] and "largest rounding change" in adj.message


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.bool_])
def test_running_stats_of_bytes_are_exact_across_blocks(dtype: type):
    info = np.iinfo(np.int8 if dtype is np.bool_ else dtype)
    values = np.random.default_rng(0).integers(info.min, info.max + 1, (3, 100_000)).astype(dtype)
    stats = RunningStats()
    stats.add_finite(values.astype(np.int8) if dtype is np.bool_ else values)  # as ArrayRange passes booleans
    wide = values.astype(np.int64)
    assert stats.total == wide.sum() and stats.total_sq == (wide**2).sum() and stats.count == values.size
    assert (stats.low, stats.high) == (wide.min(), wide.max())


@pytest.mark.parametrize("value", [255, -128, 0])
@pytest.mark.parametrize("size", [1, 255, 256, 70_001])
def test_byte_sums_stay_exact_at_the_extremes(value: int, size: int):
    values = np.full(size, value, np.uint8 if value >= 0 else np.int8)  # the largest float32 row sums
    stats = RunningStats()
    stats.add_finite(values)
    assert stats.total == value * size and stats.total_sq == value * value * size


def test_running_stats_and_report_json(tmp_path: Path):
    stats = RunningStats()
    stats.add(np.array([1.0, 3.0, np.nan]))
    assert stats.to_json() == {"count": 2, "mean": 2.0, "std": 1.0, "min": 1.0, "max": 3.0}
    report = ConversionReport(source="x", source_timesteps=9)
    report.written(episode([1.0, 1.0, 1.0]))
    report.written(episode([2.0, 2.0, 2.0, 2.0], end="truncated"))
    report.adjust("dropped", "one step dropped", episode=5, dropped_timesteps=1)
    report.adjust("dropped", "one step dropped", episode=6, dropped_timesteps=1)
    report.finish("converted")
    doc = json.loads(report.write(tmp_path / "r.json").read_text())
    assert doc["accounting"] == {
        "source_timesteps": 9,
        "written": 7,
        "filtered": 0,
        "not_selected": 0,
        "dropped": 2,
        "balanced": True,
    }
    assert doc["adjustments"][0]["examples"] == [5, 6] and doc["endings"]["truncated"] == 1
    assert math.isclose(doc["episode_return"]["mean"], 5.5) and doc["observations"]["x"]["per_dim_max"] == [0, 0]
    render(doc)  # builds rich renderables without a console
