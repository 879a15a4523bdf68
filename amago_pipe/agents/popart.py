"""PopArt: per-discount-factor value normalisation that preserves the critic's outputs when its statistics move.

Pure torch; must not import stores, YAML, pipelines or envs.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn


class PopArt(nn.Module):
    """Affine output layer `w * x + b` (normalised values) with running target statistics `mu`, `sigma`.

    Raw values are `sigma * (w * x + b) + mu`. `update(targets, mask)` moves mu/sigma towards the batch's
    masked moments (rate `beta`; the first batch sets them, with sigma >= 1 so that early targets which
    barely vary do not blow up the normalised values) and rescales w, b so that raw outputs stay the same (Preserving Outputs Precisely). One statistic per discount factor (G); `axis` says where G is.
    """

    mu: torch.Tensor
    nu: torch.Tensor
    updates: torch.Tensor

    def __init__(self, n_gammas: int, *, beta: float = 5e-4, enabled: bool = True, min_sigma: float = 1e-4):
        super().__init__()
        self.enabled, self.beta, self.min_sigma = enabled, beta, min_sigma
        self.w = nn.Parameter(torch.ones(n_gammas), requires_grad=enabled)
        self.b = nn.Parameter(torch.zeros(n_gammas), requires_grad=enabled)
        self.register_buffer("mu", torch.zeros(n_gammas, dtype=torch.float64))
        self.register_buffer("nu", torch.ones(n_gammas, dtype=torch.float64))
        self.register_buffer("updates", torch.zeros((), dtype=torch.float64))

    @property
    def sigma(self) -> torch.Tensor:
        """(G,) float64 running standard deviation of the targets."""
        return (self.nu - self.mu.square()).clamp(min=self.min_sigma**2).sqrt()

    def _view(self, t: torch.Tensor, like: torch.Tensor, axis: int) -> torch.Tensor:
        """(G,) statistics shaped to broadcast against `like` whose G axis is `axis`."""
        shape = [1] * like.dim()
        shape[axis] = t.shape[0]
        return t.to(like.dtype).view(shape)

    def forward(
        self, x: torch.Tensor, *, normalized: bool = True, detach: bool = False, axis: int = -1
    ) -> torch.Tensor:
        """`x` with G on `axis` -> normalised values (or raw values); `detach` keeps gradients out of w and b."""
        w, b = (self.w.detach(), self.b.detach()) if detach else (self.w, self.b)
        out = self._view(w, x, axis) * x + self._view(b, x, axis)
        if normalized:
            return out
        return out * self._view(self.sigma, x, axis) + self._view(self.mu, x, axis)

    def normalize(self, values: torch.Tensor, *, axis: int = -1) -> torch.Tensor:
        """Raw values (G on `axis`) -> normalised values."""
        return (values - self._view(self.mu, values, axis)) / self._view(self.sigma, values, axis)

    def denormalize(self, values: torch.Tensor, *, axis: int = -1) -> torch.Tensor:
        """Normalised values (G on `axis`) -> raw values."""
        return values * self._view(self.sigma, values, axis) + self._view(self.mu, values, axis)

    @torch.no_grad()
    def update(self, targets: torch.Tensor, mask: torch.Tensor) -> None:
        """Fold raw `targets (..., G)` where `mask (...)` is true into mu/nu; rescale w, b to preserve outputs.

        Under torch.distributed the batch moments are averaged over processes, so every replica stays equal.
        """
        if not self.enabled:
            return
        weight = mask.to(torch.float64).unsqueeze(-1)  # (..., 1)
        flat_t = targets.to(torch.float64).reshape(-1, targets.shape[-1])  # (N, G)
        flat_w = weight.reshape(-1, 1)  # (N, 1)
        sums = torch.stack([(flat_t * flat_w).sum(0), (flat_t.square() * flat_w).sum(0)])  # (2, G)
        count = flat_w.sum().reshape(1).expand(targets.shape[-1]).clone()  # (G,)
        stats = torch.cat([sums, count[None]], dim=0)  # (3, G)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(stats)
        if float(stats[2, 0]) <= 0:
            return
        mean, mean_sq = stats[0] / stats[2], stats[1] / stats[2]  # (G,) each
        old_mu, old_sigma = self.mu.clone(), self.sigma
        self.updates.add_(1)
        if float(self.updates) == 1:  # start from the first batch, with the prior's sigma = 1 as a floor
            self.mu.copy_(mean)
            self.nu.copy_(mean.square() + (mean_sq - mean.square()).clamp(min=1.0))
            return  # the untrained outputs are not worth preserving
        self.mu.mul_(1 - self.beta).add_(self.beta * mean)
        self.nu.mul_(1 - self.beta).add_(self.beta * mean_sq)
        new_sigma = self.sigma
        self.w.data.mul_((old_sigma / new_sigma).to(self.w.dtype))
        self.b.data.copy_(((old_sigma * self.b.data.to(torch.float64) + old_mu - self.mu) / new_sigma).to(self.b.dtype))

    def stats(self) -> dict[str, float]:
        """Mean mu, sigma, w, b over discount factors (for logging)."""
        return {
            "popart_mu": float(self.mu.mean()),
            "popart_sigma": float(self.sigma.mean()),
            "popart_w": float(self.w.detach().mean()),
            "popart_b": float(self.b.detach().mean()),
        }
