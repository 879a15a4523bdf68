"""Training metrics: `metrics.jsonl` always, wandb when configured; sections `train/`, `val/`, `buffer/`.

Every line carries the x-axes `step` (gradient steps), `epoch`, `timesteps` and `wall_time` (declared to
wandb with `define_metric`). Imports no torch; wandb is imported only when enabled.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from amago_pipe.errors import AmagoPipeError, MissingDependencyError

if TYPE_CHECKING:
    import torch

    from amago_pipe.store import TrajectoryStore

METRICS_FILE = "metrics.jsonl"
X_AXES = ("step", "epoch", "timesteps", "wall_time")
SECTIONS = ("train", "val", "buffer")
WANDB_SUBDIR = "wandb"
"""wandb's folder below the output folder (unless WANDB_DIR is set): a side file, not a training output."""


class MetricsLogger:
    """Appends one JSON line per `log` call; mirrors to wandb (`disabled` | `offline` | `online`)."""

    def __init__(
        self,
        out_dir: Path,
        *,
        wandb_mode: str = "disabled",
        project: str = "amago-pipe",
        entity: str | None = None,
        group: str | None = None,
        run_name: str = "",
        config: dict[str, Any] | None = None,
        enabled: bool = True,
    ):
        self.path = Path(out_dir) / METRICS_FILE
        self.enabled = enabled
        if enabled:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._wandb: Any = None
        if enabled and wandb_mode != "disabled":
            self._wandb = _start_wandb(wandb_mode, project, entity, group, run_name, config or {}, Path(out_dir))

    def truncate_after(self, step: int) -> int:
        """Drop lines logged after gradient step `step` (a resumed run redoes them); returns lines dropped."""
        if not self.enabled or not self.path.exists():
            return 0
        kept, dropped = [], 0
        for line in self.path.read_text().splitlines():
            try:
                keep = json.loads(line).get("step", 0) <= step
            except json.JSONDecodeError:
                keep = False  # a line cut by the kill
            if keep:
                kept.append(line)
            else:
                dropped += 1
        tmp = self.path.with_name(f".tmp-{self.path.name}")
        tmp.write_text("".join(f"{line}\n" for line in kept))
        os.replace(tmp, self.path)
        return dropped

    def log(self, metrics: dict[str, Any], *, step: int, epoch: float, timesteps: int, wall_time: float) -> None:
        """Write `metrics` (keys already prefixed `train/`, `val/`, `buffer/`) with the x-axes."""
        if not self.enabled:
            return
        row: dict[str, Any] = {"step": step, "epoch": epoch, "timesteps": timesteps, "wall_time": round(wall_time, 3)}
        row.update({k: _plain(v) for k, v in metrics.items()})
        with open(self.path, "a") as f:
            f.write(json.dumps(row, allow_nan=True) + "\n")
        if self._wandb is not None:
            self._wandb.log(row)

    def close(self) -> None:
        if self._wandb is not None:
            self._wandb.finish()
            self._wandb = None


def read_metrics(path: Path) -> list[dict[str, Any]]:
    """All rows of a metrics.jsonl file (lines that do not parse are skipped)."""
    rows: list[dict[str, Any]] = []
    if not Path(path).exists():
        return rows
    for line in Path(path).read_text().splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return rows


def _plain(value: Any) -> Any:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else value
    return value


def _start_wandb(
    mode: str, project: str, entity: str | None, group: str | None, name: str, config: dict[str, Any], out_dir: Path
) -> Any:
    try:
        import wandb
    except ImportError as e:
        raise MissingDependencyError(
            "logging.wandb is enabled but wandb is not installed; `pip install wandb` or set logging.wandb: disabled"
        ) from e
    init: Any = wandb.init
    run = init(
        mode=mode,
        project=project,
        entity=entity,
        group=group,
        name=name or None,
        config=config,
        dir=os.environ.get("WANDB_DIR") or str(out_dir),
        reinit=True,
    )
    run.define_metric("step")  # gradient steps: the default x-axis; epoch, timesteps and wall_time the others
    for name in (*X_AXES[1:], *(f"{section}/*" for section in SECTIONS)):
        run.define_metric(name, step_metric="step")
    return run


class MetricWindow:
    """Means of per-step metric tensors since the last flush (tensors summed on their device, read once)."""

    def __init__(self) -> None:
        self.sums: dict[str, torch.Tensor] = {}
        self.count = 0

    def add(self, metrics: dict[str, torch.Tensor]) -> None:
        for k, v in metrics.items():
            self.sums[k] = self.sums[k] + v if k in self.sums else v.clone()
        self.count += 1

    def flush(self, prefix: str) -> dict[str, float]:
        out = {f"{prefix}{k}": float(v) / max(self.count, 1) for k, v in self.sums.items()}
        self.sums, self.count = {}, 0
        return out


def partition_sizes(store: TrajectoryStore, names: Iterable[str]) -> dict[str, int]:
    """Timesteps in each of the partitions `names` that the store has (empty when the store cannot be read)."""
    try:
        known = set(store.partitions())
        return {p: store.partition_info(p).timesteps for p in names if p in known}
    except AmagoPipeError:
        return {}
