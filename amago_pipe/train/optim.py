"""AdamW with weight decay on weight matrices only, and the linear-warmup learning-rate rule.

The learning rate is a pure function of the gradient step (no scheduler state to save). Pure torch.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import nn


def param_groups(
    named: Iterable[tuple[str, nn.Parameter]], weight_decay: float, *, scaled: tuple[str, ...] = (), scale: float = 1.0
) -> list[dict[str, object]]:
    """Matrices/convolutions decay; biases, norms, gains and PopArt's w/b do not. Parameters whose names start with
    one of `scaled` get their own groups at `scale` times the learning rate (`lr_scale`, read by `set_lr`)."""
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, p in named:
        if not p.requires_grad:
            continue
        decays = p.dim() >= 2 and not name.endswith(".bias")
        groups.setdefault((scale != 1.0 and name.startswith(scaled), decays), []).append(p)
    return [
        {"params": groups[key], "weight_decay": weight_decay if key[1] else 0.0, "lr_scale": scale if key[0] else 1.0}
        for key in [(False, True), (False, False), (True, True), (True, False)]
        if key in groups or not key[0]  # the two unscaled groups always exist (checkpoints keep their order)
    ]


def make_optimizer(
    model: nn.Module, *, lr: float, weight_decay: float, scaled: tuple[str, ...] = (), scale: float = 1.0
) -> torch.optim.AdamW:
    """AdamW over the trainable parameters of `model`; those named with a prefix in `scaled` learn at `scale` x lr."""
    groups = param_groups(model.named_parameters(), weight_decay, scaled=scaled, scale=scale)
    for group in groups:
        group["lr"] = lr * float(group["lr_scale"])  # type: ignore[arg-type]
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.999))


def lr_at(step: int, *, peak: float, warmup_steps: int) -> float:
    """Linear warmup from peak/warmup to `peak` over `warmup_steps` gradient steps, then constant."""
    if warmup_steps <= 0:
        return peak
    return peak * min(1.0, (step + 1) / warmup_steps)


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """Set the learning rate of every parameter group (times its `lr_scale`)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
