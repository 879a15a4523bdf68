"""The validation-best record of a training run and early stopping on it (`validate.patience`).

The record is `TrainingState.best`, a JSON dict kept in every checkpoint: `epoch`, `return_mean` and `since`, the
validations since that epoch that have not beaten it (counted from the last change of training data only).
"""

from __future__ import annotations

import math
from typing import Any

from amago_pipe.config.train import TrainStageConfig


def last_data_change(cfg: TrainStageConfig) -> int:
    """0-based epoch from which the training data stops changing phase: online collection starts, or the last
    `partition_schedule` phase begins (0 when neither)."""
    starts = [p.from_epoch for p in cfg.partition_schedule]
    if cfg.online is not None:
        starts.append(cfg.online.start_at_epoch)
    return max(starts, default=0)


def record_validation(best: dict[str, Any], epoch: int, score: float, *, counts: bool) -> bool:
    """Enter epoch `epoch`'s validation return into `best` (in place); True when it is the new best. A validation
    that does not beat the best adds to `since` when it `counts`."""
    held = float(best.get("return_mean", math.nan))
    if not best or not math.isfinite(held) or score > held:
        best.clear()
        best.update(epoch=epoch, return_mean=score, since=0)
        return True
    if counts:
        best["since"] = int(best.get("since", 0)) + 1
    return False


def patience_spent(best: dict[str, Any], patience: int) -> bool:
    """True when `patience` validations in a row have not beaten the best."""
    return bool(best) and int(best.get("since", 0)) >= patience
