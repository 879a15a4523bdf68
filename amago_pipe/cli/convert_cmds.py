"""`amago-pipe convert SOURCE ARG`, `amago-pipe datasets` and `amago-pipe store to-minari`.

One command per registered source (and any `package.module:Class` plugin), generated from the source's config
class; options build the same ConvertStageConfig a pipeline uses. Heavy imports inside.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from typing import TYPE_CHECKING, Any, Literal

import click

from amago_pipe.cli.common import Verbosity, console, parse_key_values
from amago_pipe.errors import ConfigError
from amago_pipe.progress import progress_bar

if TYPE_CHECKING:
    from amago_pipe.config.convert import SourceConfig


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


COMMON_OPTIONS = [
    click.Option(["--store", "store_path"], required=True, metavar="PATH", help="Trajectory store to write into."),
    click.Option(["--partition"], default="protected", show_default=True, help="Store partition to write."),
    click.Option(["--episodes"], metavar="N|START:STOP", help="Only the first N source episodes, or a range."),
    click.Option(
        ["--filter", "filters"],
        multiple=True,
        metavar="KEY=VALUE",
        help="min_length, max_length, min_return, max_return, ends, metadata.<key> (repeatable).",
    ),
    click.Option(["--allow-nonfinite"], is_flag=True, help="Keep NaN/inf values (counted in the report)."),
    click.Option(["--env-name"], help="Environment name stored with each episode (default: from the source)."),
    click.Option(["--force"], is_flag=True, help="Convert again even if this source is already in the partition."),
    click.Option(
        ["--opt", "source_opts"],
        multiple=True,
        metavar="KEY=VALUE",
        help="Any field of the source's config (YAML value; repeatable), e.g. for plugins.",
    ),
    click.Option(["--report", "report_path"], metavar="FILE", help="Also write the JSON report to FILE."),
    click.Option(["--json", "as_json"], is_flag=True, help="Print the report as one JSON object."),
]
"""Options of every `convert` command: the stage's own settings, then output."""


class ConvertGroup(click.Group):
    """Resolves `amago-pipe convert SOURCE` to a command built from the source's config class."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from amago_pipe.config.registries import CONVERTERS

        return CONVERTERS.names()

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from amago_pipe.config.build import resolve_component_class
        from amago_pipe.config.convert import SourceConfig
        from amago_pipe.config.registries import CONVERTERS

        if name not in CONVERTERS and ":" not in name:
            return None
        return source_command(name, resolve_component_class(SourceConfig, name, "convert SOURCE"))


@click.group(cls=ConvertGroup)
def convert() -> None:
    """Convert a dataset (Minari, D4RL HDF5, AMAGO buffer, or a `package.module:Class` plugin) into a store partition.

    Each source's options are the fields of its config (the same as `source: {type: ...}` in a pipeline).
    Conversions are atomic (a failure leaves the partition unchanged and removes only what it wrote) and
    idempotent (the same source into the same partition is a no-op unless --force; conversions of one source
    running at once keep one copy). Each prints a report of what it found and changed.
    """


def source_command(name: str, cls: type[SourceConfig]) -> click.Command:
    """`amago-pipe convert NAME ARG [source options] [common options]`, generated from config class `cls`."""
    from amago_pipe.config.base import class_doc

    all_fields = dataclasses.fields(typing.cast(Any, cls))
    names = {f.name for f in all_fields}
    positional = cls.cli_arg in names  # a plugin without that field takes no positional argument
    skip = {"type", *(cls.cli_positional if positional else ())}
    fields = [f for f in all_fields if f.init and f.name not in skip]
    params: list[click.Parameter] = [click.Argument([cls.cli_arg], metavar=cls.cli_arg.upper())] if positional else []
    params += [_field_option(cls, f) for f in fields] + COMMON_OPTIONS
    arg = f" {cls.cli_arg.upper()}" if positional else ""
    example = f"amago-pipe convert {name}{arg} --store runs/data.zarr"

    @click.pass_obj
    def callback(obj: Verbosity | None, **values: Any) -> None:
        source = {"type": name, **(cls.from_cli_arg(values.pop(cls.cli_arg)) if positional else {})}
        for f in fields:
            value = values.pop(f.name)
            if value not in (None, ()) and value != f.default:
                source[f.name] = list(value) if isinstance(value, tuple) else value
        source.update(parse_key_values(values.pop("source_opts"), "--opt", "info_keys=[qpos]"))
        _run(obj, source, values)

    help_text = f"{class_doc(cls)}\n\n\b\n{example}"
    return click.Command(name, callback=callback, params=params, help=help_text, short_help=class_doc(cls))


def _field_option(cls: type, f: dataclasses.Field[Any]) -> click.Option:
    """A click option for one config field: flags for bools, choices for literals, repeats for lists."""
    from amago_pipe.config.base import field_docs

    hints = typing.get_type_hints(cls)
    tp, doc, flag = hints[f.name], field_docs(cls).get(f.name, ""), f.name.replace("_", "-")
    if tp is bool:
        if f.default is True:
            return click.Option([f"--no-{flag}", f.name], is_flag=True, flag_value=False, default=True, help=doc)
        return click.Option([f"--{flag}", f.name], is_flag=True, default=False, help=doc)
    if typing.get_origin(tp) is Literal:
        choices = click.Choice([str(a) for a in typing.get_args(tp)])
        return click.Option([f"--{flag}", f.name], type=choices, default=f.default, show_default=True, help=doc)
    if typing.get_origin(tp) is list:
        return click.Option([f"--{flag.removesuffix('s')}", f.name], multiple=True, help=f"{doc} (repeatable)")
    scalar = next((t for t in (int, float) if t is tp or t in typing.get_args(tp)), str)
    return click.Option([f"--{flag}", f.name], type=scalar, default=None, help=doc)


def _run(obj: Verbosity | None, source: dict[str, Any], opts: dict[str, Any]) -> None:
    from amago_pipe.converters.report import render
    from amago_pipe.converters.run import convert as run_conversion

    cfg = build_config(
        {
            "source": source,
            "partition": opts["partition"],
            "episodes": parse_episodes(opts["episodes"]),
            "filters": parse_key_values(opts["filters"], "--filter", "min_length=10"),
            "allow_nonfinite": opts["allow_nonfinite"],
            "env_name": opts["env_name"],
            "force": opts["force"],
        }
    )
    level = obj.level if obj else 0
    with progress_bar("convert", unit="timesteps", quiet=level < 0 or opts["as_json"]) as task:
        report = run_conversion(cfg, opts["store_path"], progress=task, report_path=opts["report_path"])
    doc = report.to_json()
    if opts["as_json"]:
        click.echo(json.dumps(doc, indent=2, default=str))
    elif level >= 0:
        console().print(render(doc))


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
    with progress_bar("to-minari", unit="timesteps", quiet=level < 0 or as_json) as task:
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
