"""Base config of a pipeline stage; each stage type subclasses it with its own fields."""

from __future__ import annotations

from amago_pipe.config.base import Component, config
from amago_pipe.config.registries import STAGES


@config
class StageConfig(Component):
    """One named stage of a pipeline; `type` picks the stage kind."""

    registry = STAGES

    needs: list[str] | None = None
    """Stages that must run before this one (default: the previous stage in the file; [] for none)."""
    description: str = ""
    """Free text shown by `amago-pipe plan`."""


def seed_from(*candidates: int | None) -> int:
    """The seed rule of every stage: the first seed that is set, most specific first (e.g. a stage's `seed:`,
    then its env's `seed:`, then the seed the engine derives from the pipeline seed and the stage name)."""
    for seed in candidates:
        if seed is not None:
            return seed
    raise ValueError("seed_from needs at least one seed that is set (the engine's derived seed)")
