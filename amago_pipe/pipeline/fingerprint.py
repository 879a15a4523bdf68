"""Config diffs of stage records, the keys left out of a config hash, the stage log name; the hashes themselves live
in `amago_pipe.hashing`."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable
from typing import Any

from amago_pipe.config.base import to_dict
from amago_pipe.config.build import Problems, build
from amago_pipe.config.stages import StageConfig

STAGE_LOG = "stage.log"
"""Per-stage log file; excluded from the output hash (it changes on every run)."""


def changed_keys(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted key paths where two JSON-like configs differ (a list or a leaf counts as one key)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out: list[str] = []
        for key in sorted({*old, *new}, key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in old or key not in new:
                out.append(path)
            else:
                out.extend(changed_keys(old[key], new[key], path))
        return out
    return [] if old == new else [prefix]


def without_keys(config: dict[str, Any], keys: Iterable[str]) -> dict[str, Any]:
    """A `stage_config` (`{"stage": ..., "store": ..., "seed": ...}`) without the stage keys `keys` (dotted paths
    inside the stage, e.g. `logging`); `config` itself is not changed."""
    out = copy.deepcopy(config)
    for key in keys:
        node: Any = out.get("stage")
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(leaf, None)
    return out


def as_read_today(config: dict[str, Any], name: str) -> dict[str, Any] | None:
    """A recorded `stage_config` as today's code reads it: keys added since it was recorded take their defaults
    (which keep the old behaviour) and keys that moved are read where they are now (`Problems(upgrade=True)`), so an
    upgrade alone re-runs nothing. None when it no longer loads."""
    problems = Problems(upgrade=True)
    stage = build(StageConfig, copy.deepcopy(config.get("stage", {})), problems, name)
    if problems.lines() or stage is None:
        return None
    data = {k: v for k, v in to_dict(stage).items() if k != "description"}
    return dict(json.loads(json.dumps({**config, "stage": data}, default=str)))
