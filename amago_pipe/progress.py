"""The one progress protocol: what long work (convert, collect, train, export) reports to, and a rich bar for it.

Library code takes a `Progress` (or None) and calls `advance`/`update`; the CLI and the pipeline console hand
it a `progress_bar(...)`. rich is imported only when a bar is shown.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol


class Progress(Protocol):
    """A live progress bar of one piece of work."""

    def advance(self, n: float = 1) -> None:
        """Count `n` more units done."""

    def update(self, *, completed: float | None = None, total: float | None = None, **fields: Any) -> None:
        """Set the position or the total, and/or show named values (e.g. `loss=0.1`) beside the bar."""


class SilentProgress:
    """A Progress that shows nothing (quiet runs, logs and pipes)."""

    def advance(self, n: float = 1) -> None:
        """Do nothing."""

    def update(self, *, completed: float | None = None, total: float | None = None, **fields: Any) -> None:
        """Do nothing."""


class _RichTask:
    """A Progress backed by one task of a rich Progress display."""

    def __init__(self, display: Any, task_id: Any):
        self.display, self.task_id = display, task_id

    def advance(self, n: float = 1) -> None:
        self.display.advance(self.task_id, n)

    def update(self, *, completed: float | None = None, total: float | None = None, **fields: Any) -> None:
        info = " ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in fields.items())
        changes: dict[str, Any] = {"info": info} if fields else {}
        if completed is not None:
            changes["completed"] = completed
        if total is not None:
            changes["total"] = total
        self.display.update(self.task_id, **changes)


@contextmanager
def progress_bar(
    description: str,
    *,
    total: float | None = None,
    unit: str = "it",
    console: Any = None,
    quiet: bool = False,
    indent: str = "",
) -> Iterator[Progress]:
    """`with progress_bar("convert", unit="timesteps") as task:` a transient bar with count, rate, elapsed and
    remaining time and the last `update` fields; silent when `quiet` or the console is not a terminal."""
    from rich.console import Console

    console = console or Console(stderr=True)
    if quiet or not console.is_terminal:
        yield SilentProgress()
        return
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.progress import Progress as RichProgress

    columns = [
        TextColumn(f"{indent}{description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn(unit),
        _rate_column(unit),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[info]}"),
    ]
    with RichProgress(*columns, console=console, transient=True) as display:
        yield _RichTask(display, display.add_task(description, total=total, info=""))


def _rate_column(unit: str) -> Any:
    """A rich column showing `<rate> <unit>/s` (rich is imported lazily, so the class is made here)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} {unit}/s")

    return RateColumn()
