"""`amago-pipe convert {minari,d4rl,amago-buffer}`, `amago-pipe datasets` and `amago-pipe store to-minari`.

Parses options into the same ConvertStageConfig a pipeline uses and calls the converters; heavy imports inside.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from amago_pipe.cli.common import Verbosity, console, parse_key_values
from amago_pipe.errors import ConfigError


def build_config(data: dict[str, Any]) -> Any:
    """Strictly build a ConvertStageConfig from plain data (ConfigError lists every problem)."""
    from amago_pipe.config.build import Problems, build
    from amago_pipe.config.convert import ConvertStageConfig

    problems = Problems()
    cfg = build(ConvertStageConfig, {"type": "convert", **data}, problems)
    problems.raise_if_any()
    return cfg


def parse_episodes(value: str | None) -> int | list[int] | None:
    """`--episodes 100` (the first 100) or `--episodes 10:50` (episodes 10..49)."""
    if value is None:
        return None
    start, sep, stop = value.partition(":")
    try:
        return [int(start or 0), int(stop)] if sep else int(value)
    except ValueError as e:
        raise ConfigError(f"--episodes: '{value}' is not N or START:STOP (e.g. --episodes 100 or 0:100)") from e


def common_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Options every `convert` subcommand takes."""
    options = [
        click.option("--store", "store_path", required=True, metavar="PATH", help="Trajectory store to write into."),
        click.option("--partition", default="protected", show_default=True, help="Store partition to write."),
        click.option("--episodes", metavar="N|START:STOP", help="Only the first N source episodes, or a range."),
        click.option(
            "--filter",
            "filters",
            multiple=True,
            metavar="KEY=VALUE",
            help="min_length, max_length, min_return, max_return, ends, metadata.<key> (repeatable).",
        ),
        click.option(
            "--info-key",
            "info_keys",
            multiple=True,
            metavar="KEY",
            help="Keep a per-step info array as observation key infos/KEY (repeatable).",
        ),
        click.option("--allow-nonfinite", is_flag=True, help="Keep NaN/inf values (counted in the report)."),
        click.option("--env-name", help="Environment name stored with each episode (default: from the source)."),
        click.option("--force", is_flag=True, help="Convert again even if this source is already in the partition."),
        click.option("--report", "report_path", metavar="FILE", help="Also write the JSON report to FILE."),
        click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@click.group()
def convert() -> None:
    """Convert a dataset (Minari, D4RL HDF5, AMAGO buffer) into a trajectory store partition.

    Conversions are atomic (a failure leaves the partition unchanged and removes only what it wrote) and
    idempotent (the same source into the same partition is a no-op unless --force; conversions of one source
    running at once keep one copy). Each prints a report of what it found and changed.
    """


@convert.command("minari")
@click.argument("dataset_id", metavar="ID")
@click.option("--download", is_flag=True, help="Download the dataset if it is not found locally.")
@common_options
@click.pass_obj
def convert_minari(obj: Verbosity | None, dataset_id: str, download: bool, **opts: Any) -> None:
    """Convert the local Minari dataset ID (or a dataset folder) into the store.

    \b
    amago-pipe convert minari D4RL/pen/human-v2 --store runs/pen.zarr
    amago-pipe convert minari ./my-dataset --store runs/s.zarr --episodes 0:100
    """
    from pathlib import Path

    source = {"path": dataset_id} if Path(dataset_id).is_dir() else {"dataset": dataset_id}
    _run(obj, {"source": "minari", "download": download, **source}, opts)


@convert.command("d4rl")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option(
    "--repeat-last-obs",
    is_flag=True,
    help="Without next_observations: keep each timeout's last step, repeating its observation.",
)
@click.option(
    "--no-split-on-discontinuity",
    is_flag=True,
    help="Do not start a new episode where next_observations[t] != observations[t+1].",
)
@common_options
@click.pass_obj
def convert_d4rl(
    obj: Verbosity | None, file: str, repeat_last_obs: bool, no_split_on_discontinuity: bool, **opts: Any
) -> None:
    """Convert a D4RL-layout HDF5 FILE (read with h5py; the d4rl package is not needed).

    \b
    amago-pipe convert d4rl hopper_medium-v2.hdf5 --store runs/hopper.zarr --info-key qpos
    """
    data = {
        "source": "d4rl",
        "path": file,
        "repeat_last_obs": repeat_last_obs,
        "split_on_discontinuity": not no_split_on_discontinuity,
    }
    _run(obj, data, opts)


@convert.command("amago-buffer")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option(
    "--action-kind",
    type=click.Choice(["auto", "discrete", "continuous", "multibinary"]),
    default="auto",
    show_default=True,
    help="How to read AMAGO's float action vectors.",
)
@click.option(
    "--buffer-partition",
    "buffer_partitions",
    multiple=True,
    metavar="NAME",
    help="Sub-folder(s) of buffer/ to read (default: protected and fifo).",
)
@common_options
@click.pass_obj
def convert_amago_buffer(
    obj: Verbosity | None, directory: str, action_kind: str, buffer_partitions: tuple[str, ...], **opts: Any
) -> None:
    """Convert an AMAGO dataset folder (its buffer/ of .npz trajectories; .traj pickles are refused).

    \b
    amago-pipe convert amago-buffer ~/amago_data/my_run --store runs/s.zarr
    """
    data: dict[str, Any] = {"source": "amago-buffer", "path": directory, "action_kind": action_kind}
    if buffer_partitions:
        data["amago_partitions"] = list(buffer_partitions)
    _run(obj, data, opts)


def _run(obj: Verbosity | None, data: dict[str, Any], opts: dict[str, Any]) -> None:
    from amago_pipe.converters.report import render
    from amago_pipe.converters.run import convert as run_conversion

    data.update(
        partition=opts["partition"],
        episodes=parse_episodes(opts["episodes"]),
        filters=parse_key_values(opts["filters"], "--filter", "min_length=10"),
        info_keys=list(opts["info_keys"]),
        allow_nonfinite=opts["allow_nonfinite"],
        env_name=opts["env_name"],
        force=opts["force"],
    )
    cfg = build_config(data)
    level = obj.level if obj else 0
    with rich_progress("convert", quiet=level < 0 or opts["as_json"]) as task:
        report = run_conversion(cfg, opts["store_path"], progress=task, report_path=opts["report_path"])
    doc = report.to_json()
    if opts["as_json"]:
        click.echo(json.dumps(doc, indent=2, default=str))
    elif level >= 0:
        console().print(render(doc))


class _RichTask:
    """Adapts a rich Progress task to the converters' `Progress` protocol (rich computes the rate itself)."""

    def __init__(self, progress: Any, task_id: Any):
        self.progress, self.task_id = progress, task_id

    def advance(self, n: float = 1) -> None:
        self.progress.advance(self.task_id, n)

    def update(self, *, completed: float | None = None, total: float | None = None, **fields: Any) -> None:
        if completed is not None or total is not None:
            self.progress.update(self.task_id, completed=completed, total=total)


class rich_progress:
    """`with rich_progress("convert") as task:` a bar on stderr with timesteps and timesteps/s."""

    def __init__(self, description: str, *, quiet: bool = False):
        self.description, self.quiet = description, quiet

    def __enter__(self) -> _RichTask:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        columns = [TextColumn(self.description), BarColumn(), MofNCompleteColumn(), TextColumn("timesteps"),
                   _rate_column(), TimeElapsedColumn()]  # fmt: skip
        err = console(stderr=True)
        self.progress = Progress(*columns, console=err, transient=True, disable=self.quiet or not err.is_terminal)
        self.progress.__enter__()
        return _RichTask(self.progress, self.progress.add_task(self.description, total=None))

    def __exit__(self, *exc: Any) -> None:
        self.progress.__exit__(*exc)


def _rate_column() -> Any:
    """A rich column showing timesteps/s (rich is imported lazily, so the class is made here)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class RateColumn(ProgressColumn):
        def render(self, task: Any) -> Text:
            speed = task.finished_speed or task.speed
            return Text("" if speed is None else f"{speed:,.0f} timesteps/s")

    return RateColumn()


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
def datasets(as_json: bool) -> None:
    """List the local Minari datasets (under MINARI_DATASETS_PATH or ~/.minari/datasets)."""
    from amago_pipe.converters.minari_local import datasets_root, local_datasets

    found = local_datasets()
    rows = [
        {
            "id": k,
            "episodes": m.get("total_episodes"),
            "steps": m.get("total_steps"),
            "format": m.get("data_format"),
            "size_mb": m.get("dataset_size"),
            "minari": m.get("minari_version"),
        }
        for k, m in found.items()
    ]
    if as_json:
        click.echo(json.dumps({"root": str(datasets_root()), "datasets": rows}, indent=2, default=str))
        return
    from rich.table import Table

    table = Table(title=f"local Minari datasets in {datasets_root()}")
    for col in ("id", "episodes", "steps", "format", "size_mb", "minari"):
        table.add_column(col, justify="left" if col in ("id", "format") else "right")
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row.values()))
    console().print(table if rows else f"no local Minari datasets in {datasets_root()}")


@click.command("to-minari")
@click.argument("store_path", metavar="STORE")
@click.option("--partition", default="protected", show_default=True, help="Store partition to export.")
@click.option("--dataset-id", required=True, metavar="NS/NAME-vN", help="Id of the new Minari dataset.")
@click.option("--root", metavar="DIR", help="Minari root to write into (default: MINARI_DATASETS_PATH).")
@click.option("--description", help="Dataset description stored in its metadata.")
@click.option("--author", help="Author stored in the dataset metadata.")
@click.option("--force", is_flag=True, help="Replace an existing dataset with the same id.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.pass_obj
def to_minari(
    obj: Verbosity | None,
    store_path: str,
    partition: str,
    dataset_id: str,
    root: str | None,
    description: str | None,
    author: str | None,
    force: bool,
    as_json: bool,
) -> None:
    """Write a store partition as a new local Minari dataset (lossless), to share it in the standard format.

    \b
    amago-pipe store to-minari runs/s.zarr --partition fifo --dataset-id me/cartpole-online-v0
    """
    from amago_pipe.converters.to_minari import export_to_minari

    level = obj.level if obj else 0
    with rich_progress("to-minari", quiet=level < 0 or as_json) as task:
        summary = export_to_minari(
            store_path,
            partition,
            dataset_id,
            root=root,
            force=force,
            description=description,
            author=author,
            progress=task,
        )
    if as_json:
        click.echo(json.dumps(summary, indent=2))
    elif level >= 0:
        click.echo(
            f"wrote Minari dataset {summary['dataset_id']}: {summary['episodes']} episodes, "
            f"{summary['timesteps']} timesteps -> {summary['path']}"
        )


COMMANDS = [convert, datasets]
"""Commands this module adds to the `amago-pipe` group."""
STORE_COMMANDS = [to_minari]
"""Commands the lead attaches under the `store` group."""
