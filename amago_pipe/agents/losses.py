"""The named pieces of the actor-critic updates, shared by `agent` and `multitask`.

`td_targets` / `nstep_td_targets`, `critic_loss` / `critic_loss_bins`, `actor_loss`, the behaviour-cloning filters, masked
means and Polyak averaging. Shapes: B batch, L steps, K critics, G discount factors, A action features.
Pure torch; must not import stores, YAML, pipelines or envs.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.nn.functional as F


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of `x (B, L, ...)` over the steps where `mask (B, L)` is true (and over every trailing axis)."""
    m = mask.to(x.dtype).reshape(*mask.shape, *([1] * (x.dim() - mask.dim())))  # (B, L, 1...)
    per_step = x[0, 0].numel() if x.dim() > 2 else 1
    return (x * m).sum() / (m.sum() * per_step).clamp(min=1.0)


def td_targets(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    next_values: torch.Tensor,
    gammas: torch.Tensor,
    *,
    num_td: int,
    reduce: str,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """`y = r + gamma (1 - terminated) Q_k(s', a')` reduced over `num_td` critics drawn per sample.

    rewards (B, L) (already scaled), terminated (B, L) bool (truncation is not terminal), next_values
    (B, L, K, G) raw-scale values, gammas (G,). Critics are drawn with replacement for each (b, l, g);
    `reduce` is `min` or `mean`. Returns (B, L, G).
    """
    bsz, length, k, g = next_values.shape
    cont = (~terminated).to(next_values.dtype)[..., None, None]  # (B, L, 1, 1)
    ensemble = rewards[..., None, None] + gammas.to(next_values.dtype) * cont * next_values  # (B, L, K, G)
    idx = torch.randint(0, k, (bsz, length, num_td, g), device=next_values.device, generator=generator)
    drawn = torch.take_along_dim(ensemble, idx, dim=2)  # (B, L, num_td, G)
    return drawn.min(dim=2).values if reduce == "min" else drawn.mean(dim=2)  # (B, L, G)


def nstep_td_targets(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    mask: torch.Tensor,
    next_values: torch.Tensor,
    gammas: torch.Tensor,
    *,
    n: int,
    num_td: int,
    reduce: str,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """`y_t = sum_{i<m} gamma^i r_{t+i} + gamma^m (1 - term_{t+m-1}) Q_k(s_{t+m}, .)`, reduced as in `td_targets`.

    m = min(n, steps up to and including the first terminated step, up to the first padded step, or to the window
    end): bootstrapping stops at a terminal; a padded step or the window end (truncation, or a window cut
    mid-episode) bootstraps from the last valid next value `next_values[t+m-1]`. Step t itself always counts, so
    n=1 equals `td_targets` exactly (padded t included). rewards (B, L) (already scaled), terminated and mask
    (B, L) bool, next_values (B, L, K, G) raw-scale values of s_{t+1}, gammas (G,). Returns (B, L, G).
    """
    if n < 1:
        raise ValueError(f"nstep_td_targets: n must be at least 1, got {n}")
    bsz, length, k, g = next_values.shape
    dtype, gammas = next_values.dtype, gammas.to(next_values.dtype)
    steps = torch.arange(length, device=rewards.device).expand(bsz, length)  # (B, L)
    last = steps.clone()  # (B, L) index of the last step summed
    stopped = torch.zeros_like(mask)  # (B, L) a terminal or a padded step was reached
    ret = torch.zeros(bsz, length, g, dtype=dtype, device=rewards.device)  # (B, L, G)
    discount = torch.ones(bsz, length, g, dtype=dtype, device=rewards.device)  # (B, L, G) gamma^m
    power = torch.ones_like(gammas)  # (G,) gamma^i
    for i in range(min(n, length)):
        if i > 0:
            stopped = stopped | ~_shift(mask, i, False)
        take = ~stopped  # (B, L)
        ret = ret + take[..., None].to(dtype) * power * _shift(rewards, i, 0.0)[..., None].to(dtype)
        last = torch.where(take, steps + i, last)
        discount = torch.where(take[..., None], power * gammas, discount)
        stopped = stopped | _shift(terminated, i, False)
        power = power * gammas
    cont = (~terminated.gather(1, last)).to(dtype)[..., None, None]  # (B, L, 1, 1)
    boot = next_values.gather(1, last[..., None, None].expand(bsz, length, k, g))  # (B, L, K, G)
    ensemble = ret[:, :, None] + discount[:, :, None] * cont * boot  # (B, L, K, G)
    idx = torch.randint(0, k, (bsz, length, num_td, g), device=next_values.device, generator=generator)
    drawn = torch.take_along_dim(ensemble, idx, dim=2)  # (B, L, num_td, G)
    return drawn.min(dim=2).values if reduce == "min" else drawn.mean(dim=2)  # (B, L, G)


def _shift(x: torch.Tensor, i: int, fill: float | bool) -> torch.Tensor:
    """`x[:, t + i]` at step t, `fill` past the window end: (B, L) -> (B, L)."""
    if i == 0:
        return x
    return torch.cat([x[:, i:], torch.full_like(x[:, :i], fill)], dim=1)


def critic_loss(q_norm: torch.Tensor, target_norm: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Squared TD error in PopArt-normalised units: q (B, L, K, G) against targets (B, L, G), masked mean."""
    err = (q_norm - target_norm.detach()[:, :, None, :]).square()  # (B, L, K, G)
    return masked_mean(err, mask)


def critic_loss_bins(logits: torch.Tensor, labels: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of bin logits (B, L, K, G, N) against soft labels (B, L, G, N), masked mean."""
    logp = F.log_softmax(logits.float(), dim=-1)  # (B, L, K, G, N)
    ce = -(labels.detach()[:, :, None] * logp).sum(-1)  # (B, L, K, G)
    return masked_mean(ce, mask)


def advantage_scale(advantage: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(G,) masked standard deviation of advantages (B, L, G) per discount factor, without gradient."""
    with torch.no_grad():
        m = mask.to(advantage.dtype)[..., None]  # (B, L, 1)
        n = m.sum((0, 1)).clamp(min=1.0)  # (1,)
        mean = (advantage * m).sum((0, 1)) / n  # (G,)
        var = ((advantage - mean).square() * m).sum((0, 1)) / n
        return var.sqrt().clamp(min=1e-6)


def bc_filter(advantage: torch.Tensor, kind: str, *, beta: float, max_weight: float, leak: float) -> torch.Tensor:
    """Weights of behaviour cloning from advantages: binary 1[A>0], exp(beta A) clipped, or leaky 1 / `leak`."""
    if kind == "binary":
        return (advantage > 0).to(advantage.dtype)
    if kind == "exp":
        return torch.exp((beta * advantage).clamp(max=20.0)).clamp(max=max_weight)
    if kind == "leaky":
        return torch.where(advantage > 0, torch.ones_like(advantage), torch.full_like(advantage, leak))
    raise ValueError(f"unknown bc filter '{kind}'; expected binary, exp or leaky")


def actor_loss(
    q_pi: torch.Tensor | None,
    logp_data: torch.Tensor | None,
    weights: torch.Tensor | None,
    mask: torch.Tensor,
    *,
    online_coeff: float,
    offline_coeff: float,
) -> torch.Tensor:
    """`online_coeff * -Q(s, a~pi) + offline_coeff * -(w * log pi(a_data|s))`, masked mean over (B, L, G).

    q_pi (B, L, G) carries the policy gradient (critic weights frozen); logp_data (B, L, G) and the filter
    weights (B, L, G) make the filtered behaviour cloning term. Either term may be None when its coeff is 0.
    """
    loss = torch.zeros((), device=mask.device)
    if online_coeff > 0 and q_pi is not None:
        loss = loss + online_coeff * masked_mean(-q_pi, mask)
    if offline_coeff > 0 and logp_data is not None and weights is not None:
        loss = loss + offline_coeff * masked_mean(-(weights.detach() * logp_data.clamp(-1e3, 1e3)), mask)
    return loss


@torch.no_grad()
def polyak_update(target: Iterable[torch.Tensor], online: Iterable[torch.Tensor], tau: float) -> None:
    """target <- (1 - tau) target + tau online, parameter by parameter."""
    t_list, o_list = list(target), list(online)
    torch._foreach_lerp_(t_list, o_list, tau)
