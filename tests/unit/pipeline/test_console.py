"""The run's console lines."""

from __future__ import annotations

from rich.console import Console

from amago_pipe.pipeline.console import RichReporter
from amago_pipe.pipeline.lockfile import StageRecord


def _finished_line(metrics: dict[str, object]) -> str:
    console = Console(record=True, width=200)
    RichReporter(console).stage_finished("train", StageRecord(status="done", started=0.0, ended=5.0, metrics=metrics))
    return console.export_text()


def test_a_stage_that_stopped_early_says_so_on_the_console() -> None:
    line = _finished_line({"steps": 800, "stopped_early": 4})
    assert "done train in 5.0s  steps=800  (stopped early after epoch 4: validate.patience)" in line
    assert "stopped early" not in _finished_line({"steps": 800})
