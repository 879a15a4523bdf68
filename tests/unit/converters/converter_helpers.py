"""Helpers shared by the converter tests: build a config strictly, run a conversion, read a partition back."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from amago_pipe.converters.report import ConversionReport
from amago_pipe.converters.run import convert

from amago_pipe.config.build import build_strict
from amago_pipe.config.convert import ConvertStageConfig
from amago_pipe.store import Episode, TrajectoryStore

STAGE_FIELDS = {f.name for f in dataclasses.fields(ConvertStageConfig)}


def make_config(*, _raw: bool = False, **data: Any) -> ConvertStageConfig:
    """A ConvertStageConfig built the strict way a pipeline builds it (ConfigError on problems).

    `source="d4rl", path=...` is shorthand for `source={"type": "d4rl", "path": ...}`: keys that are not the
    stage's own go into the source component (unless `_raw`, which builds `data` as written).
    """
    if isinstance(data.get("source"), str) and not _raw:
        moved = {k: data.pop(k) for k in list(data) if k not in STAGE_FIELDS}
        data["source"] = {"type": data["source"], **moved}
    cfg = build_strict(ConvertStageConfig, {"type": "convert", **data})
    if not isinstance(cfg, ConvertStageConfig):
        raise TypeError(f"built {type(cfg).__name__}")
    return cfg


def run(store: Path, **data: Any) -> ConversionReport:
    """Convert with the given config fields into `store`."""
    return convert(make_config(**data), store)


def stored(store: Path, partition: str = "protected") -> list[Episode]:
    """Every episode of a partition, in order."""
    return list(TrajectoryStore.open(store).iter_episodes(partition))


def store_listing(store: Path) -> list[str]:
    """Every file below the store (to prove a failed conversion left it untouched)."""
    return sorted(str(p.relative_to(store)) for p in store.rglob("*") if p.is_file())
