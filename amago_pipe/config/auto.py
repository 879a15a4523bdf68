"""What each `auto` setting of the train stage becomes, side by side, one rule each; the train stage logs what they
became and records it in its summary. Config only: no torch, no numpy (the data's reward size is measured by
`amago_pipe.train.runtime.resolve_reward_multiplier`, which hands it to `reward_multiplier` here).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from amago_pipe.config.agent import AgentConfig
    from amago_pipe.config.train import TrainStageConfig

RECURRENT_LR_SCALE = 10.0
"""`model_lr_scale: auto` for the recurrent trajectory encoders: at 10x recall under distractor noise went from chance
to 1.0 with a GRU (3 of 3 seeds) and Mamba (1 of 5; every seed by 6x the updates), T-Maze corridor 100 with Mamba from
0 to 1.0 (docs/recipes.md: "The sequence model's learning rate")."""
AUTO_REWARD_SCALE = 10.0
"""`reward_multiplier: auto` scales the data's large rewards to this size (the default for rewards of size 1)."""
AUTO_REWARD_QUANTILE = 99.0
"""... where "large" is this percentile of |reward| over the nonzero rewards (robust to a few outliers)."""


def reward_multiplier(large_reward: float | None) -> float:
    """`agent.reward_multiplier: auto`: `AUTO_REWARD_SCALE` / the data's large reward (the `AUTO_REWARD_QUANTILE`
    percentile of |reward| over its nonzero rewards), to 3 significant digits; `AUTO_REWARD_SCALE` itself when every
    reward is 0 (None). Fixed once from the data at the first update, then kept in checkpoints."""
    if large_reward is None:
        return AUTO_REWARD_SCALE
    return float(f"{AUTO_REWARD_SCALE / large_reward:.3g}")


def td_reduce(agent: AgentConfig) -> Literal["min", "mean"]:
    """`agent.targets.reduce: auto`: `min` of the drawn critics (clipped double-Q) when the policy-gradient term is on
    (`online_coeff > 0`: the actor climbs the critics, so their overestimates must be held down), else `mean`."""
    reduce = agent.targets.reduce
    if reduce != "auto":
        return reduce
    return "min" if agent.online_coeff > 0 else "mean"


def model_lr_scale(train: TrainStageConfig) -> float:
    """`train.model_lr_scale: auto`: `RECURRENT_LR_SCALE` for a recurrent trajectory encoder (`gru`, `mamba`: their
    `recurrent` flag), else 1."""
    if train.model_lr_scale != "auto":
        return float(train.model_lr_scale)
    return RECURRENT_LR_SCALE if train.model.traj_encoder.recurrent else 1.0


def resolved(train: TrainStageConfig, *, reward_multiplier: float) -> dict[str, Any]:
    """What the three settings are in this run, `auto` or not (the reward multiplier as fixed from the data): the
    train stage logs them and keeps them in its summary."""
    return {
        "reward_multiplier": reward_multiplier,
        "td_reduce": td_reduce(train.agent),
        "model_lr_scale": model_lr_scale(train),
    }


def describe(train: TrainStageConfig, values: dict[str, Any]) -> str:
    """One log line of `resolved`'s values, `(auto)` after those written as `auto`."""
    written = {
        "reward_multiplier": train.agent.reward_multiplier,
        "td_reduce": train.agent.targets.reduce,
        "model_lr_scale": train.model_lr_scale,
    }
    shown = {key: f"{value:g}" if isinstance(value, float) else str(value) for key, value in values.items()}
    return ", ".join(f"{key} {text}{' (auto)' if written.get(key) == 'auto' else ''}" for key, text in shown.items())
