"""The behaviour-cloning filters named by `agent.filter: {type: ...}`: weights (B, L, G) of the data's actions from
their PopArt-normalised advantages. A plugin filter is a `BcFilterConfig` subclass whose `impl` names a function of
this signature. Pure torch + config; no stores, YAML, pipelines or envs.
"""

from __future__ import annotations

import torch

from amago_pipe.agents.losses import bc_filter, scale_for_filter
from amago_pipe.config.agent import BcFilterConfig, ExpFilterConfig, LeakyFilterConfig


def exp_weights(advantage: torch.Tensor, mask: torch.Tensor, sigma: torch.Tensor, cfg: BcFilterConfig) -> torch.Tensor:
    """exp(beta A) clipped at `max_weight`, A scaled as `scale_max` / `normalize` say; advantage (B, L, G), mask
    (B, L), sigma PopArt's value scale: (G,), or (B, 1, G) with `popart_per_task`."""
    if not isinstance(cfg, ExpFilterConfig):
        raise TypeError(f"exp_weights reads an ExpFilterConfig, got {type(cfg).__name__}")
    scaled = scale_for_filter(advantage, mask, sigma, normalize=cfg.normalize, scale_max=cfg.scale_max)
    return bc_filter(scaled, "exp", beta=cfg.beta, max_weight=cfg.max_weight, leak=0.0)


def binary_weights(
    advantage: torch.Tensor, mask: torch.Tensor, sigma: torch.Tensor, cfg: BcFilterConfig
) -> torch.Tensor:
    """1[A > 0]."""
    return bc_filter(advantage.detach(), "binary", beta=1.0, max_weight=1.0, leak=0.0)


def leaky_weights(
    advantage: torch.Tensor, mask: torch.Tensor, sigma: torch.Tensor, cfg: BcFilterConfig
) -> torch.Tensor:
    """1 for A > 0, `slope` otherwise."""
    if not isinstance(cfg, LeakyFilterConfig):
        raise TypeError(f"leaky_weights reads a LeakyFilterConfig, got {type(cfg).__name__}")
    return bc_filter(advantage.detach(), "leaky", beta=1.0, max_weight=1.0, leak=cfg.slope)
