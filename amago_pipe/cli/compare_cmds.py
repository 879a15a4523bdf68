"""`amago-pipe compare`: runs side by side (library calls only, see pipeline/compare.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from amago_pipe.cli.common import console


@click.command()
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...")
@click.option(
    "--plot",
    "plot",
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="OUT.png",
    help="Also overlay the runs' curves (losses on a log scale, validation and online return) in one PNG.",
)
def compare(run_dirs: tuple[str, ...], plot: Path | None) -> None:
    """Compare RUN_DIRs (globs allowed, e.g. 'runs/tmaze-*'): the config keys that differ, final and best metrics.

    Reads each run's resolved.yaml, its evaluate stages' record.json and its train stages' metrics.jsonl.
    """
    from amago_pipe.pipeline.compare import config_differences, load_runs, metric_table, plot_runs

    runs = load_runs(run_dirs)
    out = console()
    labels = [r.label for r in runs]
    for i, run in enumerate(runs, 1):
        out.print(f"run {i}: {run.path}")
    diffs = config_differences(runs)
    if len(runs) > 1:
        out.print(_table("config (keys that differ)", labels, diffs) if diffs else "config: no key differs")
    rows = metric_table(runs)
    out.print(_table("metrics", labels, rows) if rows else "metrics: none recorded (no train or evaluate stage done)")
    if plot is not None:
        click.echo(f"wrote {plot_runs(runs, plot)}")


def _table(title: str, labels: list[str], rows: list[tuple[str, list[Any]]]) -> Any:
    from rich import box
    from rich.table import Table

    from amago_pipe.pipeline.compare import format_value

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    table.add_column("key", overflow="fold")
    for label in labels:
        table.add_column(label, overflow="fold")
    for key, values in rows:
        table.add_row(key, *(format_value(v) for v in values))
    return table


COMMANDS = [compare]
