"""Progress in logs and pipes: plain lines (position, rate, elapsed, ETA) at a steady cadence, on the console and in
the stage's stage.log (a live bar only in a terminal)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

from rich.console import Console

from amago_pipe.pipeline.console import ProgressLines, RichReporter


def test_lines_come_at_each_tenth_and_every_30_seconds_never_two_within_5() -> None:
    now, lines = [0.0], []
    task = ProgressLines("train t", 1000, "steps", lines.append, clock=lambda: now[0])
    now[0] = 1.0
    task.update(completed=150)  # a tenth done, but only 1 s in
    assert lines == []
    now[0] = 6.0
    task.update(completed=160, epoch="1/5", critic=0.5)
    assert lines == ["train t: 160/1,000 steps (16%), 26.7 steps/s, elapsed 6.0s, ETA 31.5s  epoch=1/5 critic=0.5"]
    now[0] = 20.0
    task.update(completed=190)  # the same tenth, 14 s later: nothing
    now[0] = 36.0
    task.advance(5)  # 30 s since the last line
    assert lines[1] == "train t: 195/1,000 steps (20%), 1.17 steps/s, elapsed 36.0s, ETA 11m30s  epoch=1/5 critic=0.5"
    now[0] = 42.0
    task.update(completed=300)
    assert lines[2].startswith("train t: 300/1,000 steps (30%), 17.5 steps/s, elapsed 42.0s, ETA 40.0s")
    assert len(lines) == 3


def test_work_without_a_total_shows_its_count_and_rate() -> None:
    now, lines = [0.0], []
    task = ProgressLines("convert d4rl:d.hdf5", None, "timesteps", lines.append, clock=lambda: now[0])
    now[0] = 31.0
    task.advance(12_400)
    assert lines == ["convert d4rl:d.hdf5: 12,400 timesteps, 400 timesteps/s, elapsed 31.0s"]
    waiting = ProgressLines("export e", None, "", lines.append, clock=lambda: now[0])
    now[0] = 62.0
    waiting.update(step="torchscript")
    assert lines[-1] == "export e: elapsed 31.0s  step=torchscript"


def test_a_run_piped_to_a_file_prints_progress_lines_and_writes_them_to_stage_log(tmp_path: Path) -> None:
    out = io.StringIO()
    reporter = RichReporter(Console(file=out, force_terminal=False, width=60, highlight=False))
    factory = reporter.progress_factory()
    assert factory is not None  # was None off a terminal: a piped run showed nothing
    with factory("train t", 10, "steps") as task:
        assert isinstance(task, ProgressLines)
    handler = logging.FileHandler(tmp_path / "stage.log")
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.getLogger("amago_pipe").addHandler(handler)
    line = "train t: 160/1,000 steps (16%), 26.7 steps/s, elapsed 6.0s, ETA 31.5s  epoch=1/5 critic=0.5 [x]"
    try:
        reporter.progress_line(line)
    finally:
        logging.getLogger("amago_pipe").removeHandler(handler)
        handler.close()
    assert out.getvalue() == f"    {line}\n"  # one line however narrow the console, markup left alone
    assert (tmp_path / "stage.log").read_text() == f"INFO amago_pipe.progress: {line}\n"
    assert RichReporter(Console(file=io.StringIO()), level=-1).progress_factory() is None  # -q: nothing
