"""The top-level pipeline config: name, store, seed and the named stages."""

from __future__ import annotations

import re

from amago_pipe.config.base import config
from amago_pipe.config.build import FieldError
from amago_pipe.config.stages import StageConfig

FORMAT_VERSION = 1
STAGE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


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
        if not STAGE_NAME.match(self.name):
            raise FieldError("name", f"'{self.name}' must be letters, digits, '_' or '-' (it names the run directory)")
