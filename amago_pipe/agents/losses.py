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
    next_q_data: torch.Tensor | None = None,
    traces: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """n-step TD targets, optionally with the tree-backup off-policy correction; reduced as in `td_targets`.

    `y_t = r_t + g V_{t+1} + sum_{i=1}^{m-1} g^i (c_{t+1} ... c_{t+i}) (r_{t+i} + g V_{t+i+1} - Q_{t+i})`, where V
    is `next_values`, Q_{t+i} = Q(s_{t+i}, a_{t+i}) of the data action (`next_q_data[t+i-1]`) and c_{t+i} =
    pi(a_{t+i} | s_{t+i}) (`traces[t+i-1]`): each later reward counts as much as the policy would have taken the
    data's actions leading to it, the rest of the weight goes to the expected value (tree backup, Precup et al.
    2000; no behaviour policy needed). Without `next_q_data` / `traces` (c = 1, Q = V) the sum telescopes to the
    plain `sum_{i<m} g^i r_{t+i} + g^m V_{t+m}`. m = min(n, steps up to and including the first terminated step,
    up to the first padded step, or to the window end): bootstrapping stops at a terminal; a padded step or the
    window end bootstraps from the last valid next value. Step t itself always counts, so n=1 equals `td_targets`
    (padded t included). rewards (B, L) (already scaled), terminated and mask (B, L) bool, next_values and
    next_q_data (B, L, K, G) raw-scale, traces (B, L, G), gammas (G,). Returns (B, L, G).
    """
    if n < 1:
        raise ValueError(f"nstep_td_targets: n must be at least 1, got {n}")
    bsz, length, k, g = next_values.shape
    dtype, gammas = next_values.dtype, gammas.to(next_values.dtype)
    q_data = next_values if next_q_data is None else next_q_data
    cont = (~terminated).to(dtype)[..., None, None]  # (B, L, 1, 1)
    one_step = rewards.to(dtype)[..., None, None] + gammas * cont * next_values  # (B, L, K, G) r_t + g V_{t+1}
    ensemble = one_step
    weight = torch.ones(bsz, length, 1, g, dtype=dtype, device=next_values.device)  # g^i c_{t+1} ... c_{t+i}
    stopped = terminated  # (B, L) a terminal or a padded step was reached
    for i in range(1, min(n, length)):
        stopped = stopped | ~shift_steps(mask, i, False)
        weight = weight * gammas
        if traces is not None:
            weight = weight * shift_steps(traces.to(dtype), i - 1, 0.0)[:, :, None]
        delta = shift_steps(one_step, i, 0.0) - shift_steps(q_data, i - 1, 0.0)  # (B, L, K, G)
        ensemble = ensemble + (~stopped).to(dtype)[..., None, None] * weight * delta
        stopped = stopped | shift_steps(terminated, i, False)
    idx = torch.randint(0, k, (bsz, length, num_td, g), device=next_values.device, generator=generator)
    drawn = torch.take_along_dim(ensemble, idx, dim=2)  # (B, L, num_td, G)
    return drawn.min(dim=2).values if reduce == "min" else drawn.mean(dim=2)  # (B, L, G)


def shift_steps(x: torch.Tensor, i: int, fill: float | bool) -> torch.Tensor:
    """`x[:, t + i]` at step t, `fill` past the window end: (B, L, ...) -> (B, L, ...)."""
    if i == 0:
        return x
    return torch.cat([x[:, i:], torch.full_like(x[:, :i], fill)], dim=1)


def critic_loss(q_norm: torch.Tensor, target_norm: torch.Tensor, mask: torch.Tensor, *, kind: str) -> torch.Tensor:
    """TD regression in PopArt-normalised units: q (B, L, K, G) against targets (B, L, G), masked mean.

    `kind` is `mse` (squared error) or `huber` (squared within 1, linear beyond: 0.5 e^2 / |e| - 0.5).
    """
    err = q_norm - target_norm.detach()[:, :, None, :]  # (B, L, K, G)
    if kind == "huber":
        return masked_mean(F.huber_loss(err, torch.zeros_like(err), reduction="none", delta=1.0), mask)
    if kind == "mse":
        return masked_mean(err.square(), mask)
    raise ValueError(f"unknown critic loss '{kind}'; expected huber or mse")


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


def scale_for_filter(
    advantage: torch.Tensor, mask: torch.Tensor, sigma: torch.Tensor, *, normalize: bool, scale_max: float | None
) -> torch.Tensor:
    """PopArt-normalised advantages (B, L, G) -> the detached advantages the BC filter reads.

    `normalize`: divided by their batch std per discount factor. Else with `scale_max`: raw advantage /
    min(sigma, scale_max), sigma being PopArt's value scale ((G,), or (B, 1, G) per task); without it: as they are.
    """
    advantage = advantage.detach()
    if normalize:
        return advantage / advantage_scale(advantage, mask)
    if scale_max is None:
        return advantage
    return advantage * (sigma.detach() / scale_max).clamp(min=1.0).to(advantage.dtype)


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
