"""AdamW with weight decay on weight matrices only, and the linear-warmup learning-rate rule.

The learning rate is a pure function of the gradient step (no scheduler state to save). Pure torch.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def param_groups(named: Iterable[tuple[str, nn.Parameter]], weight_decay: float) -> list[dict[str, object]]:
    """Two groups: matrices/convolutions decay; biases, norms, gains and PopArt's w/b do not."""
    decay, no_decay = [], []
    for name, p in named:
        if not p.requires_grad:
            continue
        if p.dim() >= 2 and not name.endswith(".bias"):
            decay.append(p)
        else:
            no_decay.append(p)
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def make_optimizer(model: nn.Module, *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW over the trainable parameters of `model`."""
    return torch.optim.AdamW(param_groups(model.named_parameters(), weight_decay), lr=lr, betas=(0.9, 0.999))


def lr_at(step: int, *, peak: float, warmup_steps: int) -> float:
    """Linear warmup from peak/warmup to `peak` over `warmup_steps` gradient steps, then constant."""
    if warmup_steps <= 0:
        return peak
    return peak * min(1.0, (step + 1) / warmup_steps)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group."""
    for group in optimizer.param_groups:
        group["lr"] = lr
