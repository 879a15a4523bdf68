"""The validation-best record of a training run and early stopping on it (`validate.patience`).

The record is `TrainingState.best`, a JSON dict kept in every checkpoint: `epoch`, the ranked metric
(`return_mean` or `success_rate`, `validate.rank_by`) and `since`, the validations since that epoch that have not
beaten it (counted from the last change of training data only).
"""

from __future__ import annotations

import math
from typing import Any

from amago_pipe.config.train import TrainStageConfig
from amago_pipe.errors import DataError

RANK_KEYS = {"return": "return_mean", "success": "success_rate"}
"""`validate.rank_by` -> the key of the validation summary it ranks by."""


def validation_score(summary: dict[str, Any], rank_by: str, *, where: str) -> float:
    """The number `rank_by` ranks this validation by, over the training tasks only when held-out tasks ran beside
    them (a held-out task is reported, never selected on); DataError when the env reports no success to rank by."""
    key = RANK_KEYS[rank_by]
    summary = summary.get("training", summary)
    if key not in summary and rank_by == "success":
        raise DataError(
            f"{where}.rank_by: success, but the validation env reports no success flag (`success` or `is_success` "
            "in its info); add `wrappers: [{type: success_on_reward}]` if it pays only on success, or rank_by: return"
        )
    return float(summary.get(key, -math.inf))


def last_data_change(cfg: TrainStageConfig) -> int:
    """0-based epoch from which the training data stops changing phase: online collection starts, or the last
    `partition_schedule` phase begins (0 when neither)."""
    starts = [p.from_epoch for p in cfg.partition_schedule]
    if cfg.online is not None:
        starts.append(cfg.online.start_at_epoch)
    return max(starts, default=0)


def record_validation(
    best: dict[str, Any], epoch: int, score: float, *, counts: bool, key: str = "return_mean"
) -> bool:
    """Enter epoch `epoch`'s validation score (the summary's `key`) into `best` (in place); True when it is the new
    best. A validation that does not beat the best adds to `since` when it `counts`."""
    held = float(best.get(key, math.nan))
    if not best or not math.isfinite(held) or score > held:
        best.clear()
        best.update({"epoch": epoch, key: score, "since": 0})
        return True
    if counts:
        best["since"] = int(best.get("since", 0)) + 1
    return False


def patience_spent(best: dict[str, Any], patience: int) -> bool:
    """True when `patience` validations in a row have not beaten the best."""
    return bool(best) and int(best.get("since", 0)) >= patience
