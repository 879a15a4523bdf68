"""Console output of a run: the plan header, live progress bars per stage, and the summary table."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from amago_pipe.config.loader import LoadedPipeline
from amago_pipe.pipeline.lockfile import LockFile, StageRecord, effective_status
from amago_pipe.pipeline.runner import Decision
from amago_pipe.progress import progress_bar

ACTION_STYLE = {"run": "bold yellow", "resume": "bold cyan", "skip": "green", "excluded": "dim", "busy": "bold red"}
STATUS_STYLE = {"done": "green", "failed": "bold red", "interrupted": "yellow", "running": "cyan"}


def styled(text: str, style: str) -> str:
    """Rich markup for `text` in `style` (plain text when there is no style)."""
    return f"[{style}]{text}[/]" if style else text


def format_duration(seconds: float | None) -> str:
    """`12.3s`, `4m05s` or `1h02m`; `-` when unknown."""
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, sec = divmod(int(seconds), 60)
    return f"{minutes}m{sec:02d}s" if minutes < 60 else f"{minutes // 60}h{minutes % 60:02d}m"


def format_metric(metrics: dict[str, Any]) -> str:
    """The first metric as `key=value` (floats to 4 significant digits); empty when there is none."""
    if not metrics:
        return ""
    key, value = next(iter(metrics.items()))
    if isinstance(value, float):
        value = f"{value:.4g}"
    return f"{key}={value}"


class RichReporter:
    """Prints the plan, progress and summary of a run; `level` < 0 is quiet."""

    def __init__(self, console: Console | None = None, level: int = 0, plan_only: bool = False):
        self.console = console or Console(stderr=False, highlight=False)
        self.level = level
        self.plan_only = plan_only
        self.started: dict[str, float] = {}

    def header(self, loaded: LoadedPipeline, run_dir: Path) -> None:
        if self.level >= 0:
            self.console.print(f"[bold]pipeline[/] {loaded.config.name}  ({loaded.path})  run dir: {run_dir}")

    def decision(self, d: Decision) -> None:
        if self.level < 0:
            return
        action = "restart" if d.move_to is not None else d.action
        verb = {
            "run": "will run",
            "restart": "will restart",
            "resume": "will resume",
            "skip": "skip",
            "excluded": "not selected",
            "busy": "running",
        }[action]
        if not self.plan_only:
            verb = {"run": "run", "restart": "restart", "resume": "resume"}.get(action, verb)
        style = ACTION_STYLE.get(d.action, "")
        at = f" from {d.resume_at}" if d.resume_at else ""
        reason = f" — {d.reason}" if d.reason and d.action != "excluded" else ""
        moved = f"; old outputs moved to {d.move_to}" if d.move_to is not None else ""
        self.console.print(f"  {styled(f'{verb:>12}', style)} {d.name}{at}{reason}{moved}")

    def stage_started(self, name: str) -> None:
        self.started[name] = time.time()

    def stage_finished(self, name: str, record: StageRecord) -> None:
        if self.level < 0 and record.status == "done":
            return
        style = STATUS_STYLE.get(record.status, "")
        metric = format_metric(record.metrics)
        stopped = record.metrics.get("stopped_early")  # a train stage's `validate.patience` ran out
        self.console.print(
            f"  {styled(f'{record.status:>12}', style)} {name} in {format_duration(record.duration)}"
            + (f"  {metric}" if metric else "")
            + (f"  (stopped early after epoch {stopped}: validate.patience)" if stopped is not None else "")
        )

    def progress_factory(self) -> Any:
        if self.level < 0 or not self.console.is_terminal:  # no live bars in logs and pipes
            return None
        console = self.console

        def factory(description: str, total: float | None, unit: str) -> Any:
            return progress_bar(description, total=total, unit=unit, console=console, indent="    ")

        return factory

    def summary(self, decisions: list[Decision], lock: LockFile) -> None:
        if self.level < -1 or not decisions:
            return
        self.console.print(summary_table(lock, [d.name for d in decisions], {d.name: d for d in decisions}))


def summary_table(lock: LockFile, names: list[str], decisions: dict[str, Decision] | None = None) -> Table:
    """A table of stages: status, last duration, key metric (and this run's action when known)."""
    table = Table(title=None, show_edge=False, pad_edge=False)
    for column in ("stage", "status", "this run", "duration", "metric"):
        table.add_column(column)
    for name in names:
        rec = lock.stages.get(name, StageRecord())
        d = (decisions or {}).get(name)
        action = {"skip": "skipped", "excluded": "-", "run": "ran", "resume": "resumed"}.get(d.action, "") if d else ""
        status = effective_status(rec)
        shown = styled(status, STATUS_STYLE.get(status, ""))
        table.add_row(name, shown, action, format_duration(rec.duration), format_metric(rec.metrics))
    return table
