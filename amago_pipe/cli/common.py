"""Shared CLI plumbing: verbosity, the console, and the one place errors become exit codes."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import click

from amago_pipe.errors import OUT_OF_SPACE_HINT, AmagoPipeError, OutOfSpaceError, out_of_space, out_of_space_error


@dataclass
class Verbosity:
    """Global flags: `--debug` and the -q/-v level (0 normal, <0 quiet, >0 verbose)."""

    debug: bool = False
    level: int = 0


def console(stderr: bool = False) -> Any:
    """A rich console (imported lazily)."""
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=True)


def parse_key_values(items: tuple[str, ...], option: str, example: str) -> dict[str, Any]:
    """`KEY=VALUE` option values into a dict (values read as YAML); ConfigError names the option."""
    from amago_pipe.config.yaml_io import parse_scalar
    from amago_pipe.errors import ConfigError

    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"{option}: '{item}' is not KEY=VALUE (e.g. {option} {example})")
        out[key] = parse_scalar(value)
    return out


def parse_obs_keys(text: str | None) -> list[str] | None:
    """`--obs-keys a,b` into `["a", "b"]` (None when not given)."""
    return [k.strip() for k in text.split(",") if k.strip()] if text else None


def error_exit(message: str, code: int) -> None:
    """Print `error: message` (each extra line indented) to stderr and exit with `code`."""
    lines = message.splitlines() or [message]
    click.echo(f"error: {lines[0]}", err=True)
    for line in lines[1:]:
        click.echo(f"  {line}", err=True)
    sys.exit(code)


class AmagoGroup(click.Group):
    """Click group that turns AmagoPipeError (and friends) into one message and an exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        debug = "--debug" in sys.argv[1:]
        try:
            return super().invoke(ctx)
        except AmagoPipeError as e:
            if debug:
                raise
            if e.exit_code != OutOfSpaceError.exit_code and out_of_space(e.__cause__):  # a stage crashed on it
                error_exit(f"{str(e).splitlines()[0]}; {OUT_OF_SPACE_HINT}", OutOfSpaceError.exit_code)
            error_exit(str(e), e.exit_code)
        except KeyboardInterrupt:
            if debug:
                raise
            error_exit("interrupted", 130)
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort):
            raise
        except OSError as e:
            if debug:
                raise
            if out_of_space(e) is not None:
                error_exit(str(out_of_space_error(e.filename, e)), OutOfSpaceError.exit_code)
            error_exit(f"{e.strerror or e}: {e.filename}" if getattr(e, "filename", None) else str(e), 1)
        return None
