"""Console output of a run: the plan header, progress per stage (live bars in a terminal, plain lines in logs and
pipes, also written to the stage's `stage.log`), and the summary table."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from amago_pipe.config.loader import LoadedPipeline
from amago_pipe.pipeline.fingerprint import STAGE_LOG
from amago_pipe.pipeline.lockfile import LockFile, StageRecord, effective_status
from amago_pipe.pipeline.runner import Decision
from amago_pipe.progress import progress_bar

PROGRESS_EVERY_S = 30.0
"""Logs and pipes: the longest time between two progress lines."""
PROGRESS_TENTHS = 10
"""Logs and pipes: also a progress line each time another 1/10 of the total is done..."""
PROGRESS_GAP_S = 5.0
"""...but never two lines closer than this (work of a few seconds prints none)."""
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
        """Live bars in a terminal; in logs and pipes, `ProgressLines` to the console and the stage's stage.log."""
        if self.level < 0:
            return None
        console = self.console
        if not console.is_terminal:

            def lines(description: str, total: float | None, unit: str) -> Any:
                return progress_lines(description, total, unit, self.progress_line)

            return lines

        def factory(description: str, total: float | None, unit: str) -> Any:
            return progress_bar(description, total=total, unit=unit, console=console, indent="    ")

        return factory

    def progress_line(self, line: str) -> None:
        """Print one progress line and append it to the open stage logs (the runner's `stage.log` handlers)."""
        self.console.print(f"    {line}", markup=False, soft_wrap=True)
        logger = logging.getLogger(PROGRESS_LOGGER)
        record = logger.makeRecord(logger.name, logging.INFO, __file__, 0, line, (), None)
        for handler in logging.getLogger("amago_pipe").handlers:  # not the console's: the line is printed above
            if isinstance(handler, logging.FileHandler) and Path(handler.baseFilename).name == STAGE_LOG:
                handler.handle(record)

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


PROGRESS_LOGGER = "amago_pipe.progress"
"""The logger name progress lines carry in stage.log."""


class ProgressLines:
    """A Progress for logs and pipes: a plain line (position, rate, elapsed, ETA, the latest fields) at most every
    PROGRESS_EVERY_S seconds and at each tenth of the total, never two within PROGRESS_GAP_S."""

    def __init__(
        self,
        description: str,
        total: float | None,
        unit: str,
        emit: Callable[[str], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ):
        self.description, self.total, self.unit, self.emit, self.clock = description, total, unit, emit, clock
        self.completed, self.counted = 0.0, False
        self.fields: dict[str, Any] = {}
        self.started = clock()
        self.mark = (self.started, 0.0)
        """Time and position of the last line (or the start): the rate shown is the one since."""
        self.tenth = 0

    def advance(self, n: float = 1) -> None:
        self.completed += n
        self.counted = True
        self._maybe_emit()

    def update(self, *, completed: float | None = None, total: float | None = None, **fields: Any) -> None:
        if completed is not None:
            self.completed, self.counted = float(completed), True
        if total is not None:
            self.total = total
        if fields:
            self.fields = fields
        self._maybe_emit()

    def _maybe_emit(self) -> None:
        now = self.clock()
        since = now - self.mark[0]
        tenth = int(PROGRESS_TENTHS * self.completed / self.total) if self.total else 0
        if since >= PROGRESS_EVERY_S or (tenth > self.tenth and since >= PROGRESS_GAP_S):
            self.emit(self.line(now))
            self.mark, self.tenth = (now, self.completed), tenth

    def line(self, now: float) -> str:
        """`train x: 120/1,000 steps (12%), 4.1 steps/s, elapsed 29.3s, ETA 3m34s  loss=0.4`."""
        done, total, unit = self.completed, self.total, f" {self.unit}" if self.unit else ""
        rate = (done - self.mark[1]) / max(now - self.mark[0], 1e-9)
        parts = []
        if self.counted:
            parts.append(
                f"{done:,.0f}/{total:,.0f}{unit} ({100 * done / total:.0f}%)" if total else f"{done:,.0f}{unit}"
            )
            parts.append(f"{rate:,.0f}{unit}/s" if rate >= 100 else f"{rate:.3g}{unit}/s")
        parts.append(f"elapsed {format_duration(now - self.started)}")
        if self.counted and total and rate > 0:
            parts.append(f"ETA {format_duration(max(0.0, total - done) / rate)}")
        info = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in self.fields.items())
        return f"{self.description}: {', '.join(parts)}" + (f"  {info}" if info else "")


@contextmanager
def progress_lines(
    description: str, total: float | None, unit: str, emit: Callable[[str], None]
) -> Iterator[ProgressLines]:
    """`with progress_lines(...) as task:` a `ProgressLines` (the `progress_factory` form for logs and pipes)."""
    yield ProgressLines(description, total, unit, emit)
