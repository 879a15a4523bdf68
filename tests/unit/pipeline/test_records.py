"""Result records: the schema's round trip and refusals, the recorded command, what a summary splits into, and
the config differences `compare` shows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from amago_pipe.errors import DataError
from amago_pipe.pipeline.compare import RunInfo, config_differences, flatten
from amago_pipe.pipeline.evaluation_report import split_metrics
from amago_pipe.pipeline.records import Record, command_line, git_commit, read_record, write_record


def test_a_record_round_trips_and_leaves_empty_fields_out(tmp_path: Path) -> None:
    record = Record(family="T-Maze", task="corridor 100", encoder={"tstep": "ff", "traj": "gru"}, seed=2,
                    metrics={"success_rate": 1.0}, learned=True, command="amago-pipe run x.yaml")  # fmt: skip
    write_record(tmp_path / "r.json", record)
    data = json.loads((tmp_path / "r.json").read_text())
    assert "tasks" not in data and "git_commit" not in data and data["version"] == 1
    assert read_record(tmp_path / "r.json") == record


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"version": 1, "metrcs": {}}, "unknown key 'metrcs'; did you mean 'metrics'"),
        ({"version": 9}, "record version 9 is newer than this amago-pipe reads"),
        ({"kind": "result"}, "`version` must be a positive integer"),
        ({"version": 1, "kind": "figure"}, "`kind` must be one of result, benchmark"),
        ({"version": 1, "seed": "0"}, "`seed` must be int or null"),
        ({"version": 1, "kind": "benchmark", "table": {"columns": ["a"], "rows": [[1, 2]]}}, "row 0 has 2 cells"),
    ],
)
def test_a_record_off_the_schema_is_refused_by_name(data: dict, message: str) -> None:
    with pytest.raises(DataError, match=message):
        Record.from_json(data, "r.json")


def test_the_command_quotes_overrides_and_git_is_optional(tmp_path: Path) -> None:
    invocation = {"pipeline": "p.yaml", "run_dir": "runs/x", "overrides": ["a.b={type: ff}", "seed=1"]}
    assert command_line(invocation) == "amago-pipe run p.yaml --run-dir runs/x --set 'a.b={type: ff}' --set seed=1"
    assert command_line(None) == ""
    assert git_commit(tmp_path) is None  # not a checkout: no commit, no error


def test_a_summary_splits_into_headline_training_tasks_and_held_out() -> None:
    summary = {
        "episodes": 6, "return_mean": 0.5,
        "per_env": {"a": {"return_mean": 1.0, "episodes": 2}, "b": {"return_mean": 0.0, "episodes": 2},
                    "c": {"return_mean": 0.5, "episodes": 2}},
        "training": {"episodes": 4, "return_mean": 0.5, "task_mean": {"return_mean": 0.5}, "tasks": ["a", "b"]},
        "held_out": {"episodes": 2, "return_mean": 0.5, "tasks": ["c"]},
    }  # fmt: skip
    metrics, tasks, held = split_metrics(summary)
    assert metrics == {"return_mean": 0.5, "episodes": 4, "task_mean_return_mean": 0.5}
    assert list(tasks) == ["a", "b"] and held["c"]["return_mean"] == 0.5 and "mean over tasks" in held


def test_config_differences_name_only_the_keys_that_differ() -> None:
    a = RunInfo(Path("a"), config=flatten({"seed": 0, "stages": {"t": {"epochs": 2, "lr": 1e-3}}}))
    b = RunInfo(Path("b"), config=flatten({"stages": {"t": {"epochs": 2, "lr": 3e-4}}}))
    assert config_differences([a, b]) == [("seed", [0, "(not set)"]), ("stages.t.lr", [1e-3, 3e-4])]
