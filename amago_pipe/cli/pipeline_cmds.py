"""Pipeline commands: run, plan, validate, status, unlock, schema (library calls only, no logic)."""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import click

from amago_pipe.cli.common import Verbosity, console
from amago_pipe.errors import ConfigError

FORCE_ALL = "*"
_set_option = click.option(
    "--set", "overrides", multiple=True, metavar="KEY.PATH=VALUE", help="Override a key before validation (repeatable)."
)
_run_dir_option = click.option(
    "--run-dir", type=click.Path(file_okay=False, path_type=Path), help="Run directory (default: runs/<name>)."
)
_pipeline_arg = click.argument("pipeline", type=click.Path(path_type=Path))
_LOG_HANDLER = "amago-pipe-console"


def _setup_logging(level: int) -> None:
    """Log to stderr: rich lines in a terminal (wrapped, never cut), plain `LEVEL: message` lines otherwise."""
    from rich.console import Console

    root = logging.getLogger("amago_pipe")
    root.setLevel(logging.DEBUG)
    for old in [h for h in root.handlers if h.get_name() == _LOG_HANDLER]:
        root.removeHandler(old)
    err = Console(stderr=True, highlight=False)
    handler: logging.Handler
    if err.is_terminal:
        from rich.logging import RichHandler

        handler = RichHandler(console=err, show_path=False, show_time=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    handler.set_name(_LOG_HANDLER)
    handler.setLevel(
        logging.DEBUG if level > 1 else logging.INFO if level == 1 else logging.WARNING if level == 0 else logging.ERROR
    )
    root.addHandler(handler)


def _runner(pipeline: Path, overrides: tuple[str, ...], run_dir: Path | None, level: int, plan_only: bool) -> Any:
    from amago_pipe.config.loader import load_pipeline
    from amago_pipe.pipeline.console import RichReporter
    from amago_pipe.pipeline.preflight import check_env_ids
    from amago_pipe.pipeline.runner import Runner

    if int(os.environ.get("RANK", "0")) > 0:  # secondary process of a multi-process launch: rank 0 reports
        level = -2
    _setup_logging(level)
    loaded = load_pipeline(pipeline, overrides, checks=(check_env_ids,))
    return Runner(loaded, run_dir, RichReporter(console(), level=level, plan_only=plan_only))


@click.command()
@_pipeline_arg
@click.option("--from", "from_", metavar="STAGE", help="Start at this stage (and run what depends on it).")
@click.option("--until", metavar="STAGE", help="Stop after this stage (running only what it needs).")
@click.option("--only", metavar="STAGE", help="Run just this stage (what it needs must be done).")
@click.option(
    "--force",
    is_flag=False,
    flag_value=FORCE_ALL,
    default=None,
    metavar="[STAGE]",
    help="Re-run even if unchanged: every selected stage, or just STAGE (and then its dependents).",
)
@click.option("--dry-run", is_flag=True, help="Print the plan and stop.")
@_set_option
@_run_dir_option
@click.pass_obj
def run(
    obj: Verbosity,
    pipeline: Path,
    from_: str | None,
    until: str | None,
    only: str | None,
    force: str | None,
    dry_run: bool,
    overrides: tuple[str, ...],
    run_dir: Path | None,
) -> None:
    """Run PIPELINE: skip unchanged stages, resume interrupted ones, run the rest."""
    from amago_pipe.pipeline.graph import Selection

    runner = _runner(pipeline, overrides, run_dir, obj.level, plan_only=dry_run)
    runner.run(Selection(from_=from_, until=until, only=only, force=force), dry_run=dry_run)


@click.command()
@_pipeline_arg
@_set_option
@_run_dir_option
@click.pass_obj
def plan(obj: Verbosity, pipeline: Path, overrides: tuple[str, ...], run_dir: Path | None) -> None:
    """Show what `run` would do with each stage, and why."""
    from amago_pipe.pipeline.graph import Selection

    _runner(pipeline, overrides, run_dir, max(obj.level, 0), plan_only=True).run(Selection(), dry_run=True)


@click.command()
@click.argument("pipelines", nargs=-1, required=True, type=click.Path(path_type=Path))
@_set_option
@click.pass_obj
def validate(obj: Verbosity, pipelines: tuple[Path, ...], overrides: tuple[str, ...]) -> None:
    """Check pipeline files (every problem, with file:line) without running anything.

    What needs the store, an env made or an optional package is checked by `plan` and at the start of `run`.
    """
    from amago_pipe.config.loader import load_pipeline
    from amago_pipe.pipeline.layout import check_store_placement, default_run_dir
    from amago_pipe.pipeline.preflight import check_env_ids

    failures: list[str] = []
    for path in pipelines:
        try:
            loaded = load_pipeline(path, overrides, checks=(check_env_ids,))
            check_store_placement(loaded, default_run_dir(loaded))
        except ConfigError as e:
            failures.extend(e.problems)
            continue
        if obj.level >= 0:
            click.echo(f"ok  {path}  ({loaded.config.name}: {', '.join(loaded.config.stages)})")
    if failures:
        raise ConfigError("\n".join(failures), problems=failures)


def _require_run_dir(run_dir: Path) -> None:
    from amago_pipe.pipeline.lockfile import LOCK_FILE, is_run_dir

    if not is_run_dir(run_dir):
        what = "no such directory" if not run_dir.exists() else f"no {LOCK_FILE}"
        raise ConfigError(f"{run_dir}: not a run directory ({what}); pass runs/<pipeline name>")


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the lock file records as JSON.")
def status(run_dir: Path, as_json: bool) -> None:
    """Show the state of each stage of RUN_DIR (and who holds its lock)."""
    from dataclasses import asdict

    from amago_pipe.pipeline.console import summary_table
    from amago_pipe.pipeline.lockfile import LockFile, effective_status, lock_is_stale, read_run_lock

    _require_run_dir(run_dir)
    lock = LockFile.load(run_dir)
    holder = read_run_lock(run_dir)
    if as_json:
        stages = {k: {**asdict(v), "status": effective_status(v)} for k, v in lock.stages.items()}
        click.echo(json.dumps({"stages": stages, "lock": holder}, indent=2))
        return
    out = console()
    out.print(summary_table(lock, list(lock.stages)))
    if holder:
        state = "stale: its process is gone" if lock_is_stale(holder) else "a run is active"
        out.print(f"locked by pid {holder.get('pid')} on {holder.get('host')} ({state})")


@click.command()
@click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Remove the lock even if its process still seems alive.")
def unlock(run_dir: Path, force: bool) -> None:
    """Remove the run lock of RUN_DIR left by a run that died."""
    from amago_pipe.errors import LockError
    from amago_pipe.pipeline.lockfile import RUN_LOCK, lock_is_stale, read_run_lock
    from amago_pipe.processes import alive_here

    _require_run_dir(run_dir)
    holder = read_run_lock(run_dir)
    if holder is None:
        click.echo(f"{run_dir} is not locked")
        return
    pid, host = holder.get("pid"), holder.get("host")
    if not lock_is_stale(holder):
        if not force:
            raise LockError(
                f"{run_dir} is locked by pid {pid} on {host}, which may still be running; "
                "pass --force if you are sure it is gone"
            )
        if alive_here(host or "", pid, holder.get("started")):
            warning = (
                f"pid {pid} is ALIVE on this host and still running {run_dir}; its lock is removed anyway, but a "
                f"new run there refuses to start until it ends (stop it with `kill {pid}`)"
            )
        else:
            warning = (
                f"pid {pid} on host {host} may still be running {run_dir} (this host cannot check); its lock is "
                "removed anyway: make sure it is gone before the next run"
            )
        click.echo(f"WARNING: {warning}", err=True)
    (run_dir / RUN_LOCK).unlink(missing_ok=True)
    click.echo(f"unlocked {run_dir} (lock of pid {holder.get('pid')} removed)")


@click.command()
@click.option("--write", is_flag=True, help="Write schemas/pipeline.schema.json in the source tree.")
def schema(write: bool) -> None:
    """Print the pipeline JSON Schema (generated from the config dataclasses)."""
    from amago_pipe.config.schema import schema_text

    text = schema_text()
    if not write:
        click.echo(text, nl=False)
        return
    import amago_pipe.schemas as schemas_pkg

    target = Path(schemas_pkg.__file__).parent / "pipeline.schema.json"
    target.write_text(text)
    click.echo(f"wrote {target}")


COMMANDS = [run, plan, validate, status, unlock, schema]
