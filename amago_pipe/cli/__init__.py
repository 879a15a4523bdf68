"""The `amago-pipe` command line: parses, calls the library, maps errors to exit codes here only.

Subcommand groups live in sibling modules and are attached below; none imports torch at module
level, so `amago-pipe --help` and `validate` start fast.
"""

from __future__ import annotations

from typing import Any

import click

from amago_pipe import __version__
from amago_pipe.cli.common import AmagoGroup, Verbosity


@click.group(cls=AmagoGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name="amago-pipe")
@click.option("--debug", is_flag=True, help="Show full tracebacks for errors.")
@click.option("-q", "--quiet", count=True, help="Less output (repeat for errors only).")
@click.option("-v", "--verbose", count=True, help="More output (repeat for debug logs).")
@click.pass_context
def main(ctx: click.Context, debug: bool, quiet: int, verbose: int) -> None:
    """Sequence-based RL experiments as validated, resumable YAML pipelines.

    Describe an experiment once (convert → relabel → train → evaluate → export) and run it with
    `amago-pipe run pipeline.yaml`; unchanged stages are skipped, interrupted ones resumed.
    """
    ctx.obj = Verbosity(debug=debug, level=verbose - quiet)


def _attach(group: Any) -> None:
    from amago_pipe.cli import collect_cmds, compare_cmds, convert_cmds, export_cmds, pipeline_cmds, store_cmds

    for module in (pipeline_cmds, compare_cmds, store_cmds, convert_cmds, collect_cmds, export_cmds):
        for command in module.COMMANDS:
            group.add_command(command)
    for command in convert_cmds.STORE_COMMANDS:  # `store to-minari` lives with the converters
        store_cmds.store.add_command(command)


_attach(main)
