"""The top-level pipeline config: name, store, seed and the named stages."""

from __future__ import annotations

import re

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError, describe
from amago_pipe.config.stages import StageConfig

FORMAT_VERSION = 1
NAME_MAX = 64
"""Longest pipeline or stage name: each names a folder, and suffixes are added to some of them."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def name_problem(name: object, what: str) -> str:
    """Why `name` cannot be a pipeline or stage name (each names a folder); '' when it can. `what`: "stage name"."""
    rule = f"use 1 to {NAME_MAX} ASCII letters (a-z, A-Z), digits, '-' or '_', starting with a letter or '_'"
    if not isinstance(name, str):
        return f"{what} {describe(name)} is not a string; {rule}"
    if len(name) > NAME_MAX:
        return f"{what} '{name[:16]}...' is {len(name)} characters long; {rule}"
    if not _NAME.fullmatch(name):
        return f"{what} '{name}' is not allowed; {rule}"
    return ""


@config
class PipelineConfig:
    """A whole experiment: stages run in dependency order inside one run directory."""

    version: int = FORMAT_VERSION
    """Pipeline file format version (currently 1)."""
    name: str
    """Name of the experiment; the run directory defaults to `runs/<name>`."""
    store: str | None = None
    """Path or URL of the trajectory store shared by the stages (may be shared between pipelines)."""
    seed: int = 0
    """Base random seed; each stage derives its own from it."""
    description: str = ""
    """Free text describing the experiment."""
    stages: dict[str, StageConfig]
    """Named stages, run in dependency order (see each stage's `needs`)."""

    def __post_init__(self) -> None:
        if self.version != FORMAT_VERSION:
            raise FieldError(
                "version", f"version {self.version} is not supported by this amago-pipe (supported: {FORMAT_VERSION})"
            )
        problem = name_problem(self.name, "pipeline name")
        if problem:
            raise FieldError("name", f"{problem} (it names the run directory)")
