"""PopArt: per-discount-factor value normalisation that preserves the critic's outputs when its statistics move.

Optionally one set of statistics per task (`n_tasks`): values are then shaped (..., B, L, G, ...) with the batch
axis two before the discount factors', and every call names the batch's task ids (B,).
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
    barely vary do not blow up the normalised values) and rescales w, b so that raw outputs stay the same
    (Preserving Outputs Precisely). One statistic per discount factor (G); `axis` says where G is. With
    `n_tasks` T > 1 every parameter and statistic is (T, G) and each task's moves on its own windows only (one
    task's returns in the hundreds leave another's of size 1 its own scale); T = 1 keeps the (G,) shapes.
    """

    mu: torch.Tensor
    nu: torch.Tensor
    updates: torch.Tensor

    def __init__(
        self, n_gammas: int, *, n_tasks: int = 1, beta: float = 5e-4, enabled: bool = True, min_sigma: float = 1e-4
    ):
        super().__init__()
        self.enabled, self.beta, self.min_sigma = enabled, beta, min_sigma
        self.n_tasks = n_tasks
        shape = (n_gammas,) if n_tasks == 1 else (n_tasks, n_gammas)
        self.w = nn.Parameter(torch.ones(shape), requires_grad=enabled)
        self.b = nn.Parameter(torch.zeros(shape), requires_grad=enabled)
        self.register_buffer("mu", torch.zeros(shape, dtype=torch.float64))
        self.register_buffer("nu", torch.ones(shape, dtype=torch.float64))
        self.register_buffer("updates", torch.zeros(() if n_tasks == 1 else (n_tasks,), dtype=torch.float64))

    @property
    def sigma(self) -> torch.Tensor:
        """(G,) or (T, G) float64 running standard deviation of the targets."""
        return (self.nu - self.mu.square()).clamp(min=self.min_sigma**2).sqrt()

    def _view(self, t: torch.Tensor, like: torch.Tensor, axis: int, task: torch.Tensor | None) -> torch.Tensor:
        """Statistics `t` shaped to broadcast against `like` whose G axis is `axis` (and batch axis `axis - 2`)."""
        shape = [1] * like.dim()
        axis %= like.dim()
        shape[axis] = t.shape[-1]
        if self.n_tasks > 1:
            t = t[_task_ids(task, self.n_tasks)]  # (B, G)
            shape[axis - 2] = t.shape[0]
        return t.to(like.dtype).reshape(shape)

    def forward(
        self,
        x: torch.Tensor,
        *,
        normalized: bool = True,
        detach: bool = False,
        axis: int = -1,
        task: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """`x` with G on `axis` -> normalised values (or raw values); `detach` keeps gradients out of w and b."""
        w, b = (self.w.detach(), self.b.detach()) if detach else (self.w, self.b)
        out = self._view(w, x, axis, task) * x + self._view(b, x, axis, task)
        if normalized:
            return out
        return out * self._view(self.sigma, x, axis, task) + self._view(self.mu, x, axis, task)

    def normalize(self, values: torch.Tensor, *, axis: int = -1, task: torch.Tensor | None = None) -> torch.Tensor:
        """Raw values (G on `axis`) -> normalised values."""
        return (values - self._view(self.mu, values, axis, task)) / self._view(self.sigma, values, axis, task)

    def denormalize(self, values: torch.Tensor, *, axis: int = -1, task: torch.Tensor | None = None) -> torch.Tensor:
        """Normalised values (G on `axis`) -> raw values."""
        return values * self._view(self.sigma, values, axis, task) + self._view(self.mu, values, axis, task)

    def sigma_of(self, task: torch.Tensor | None) -> torch.Tensor:
        """The value scale each window of a batch is normalised by: (G,), or (B, 1, G) with tasks."""
        return self.sigma if self.n_tasks == 1 else self.sigma[_task_ids(task, self.n_tasks)][:, None, :]

    @torch.no_grad()
    def update(self, targets: torch.Tensor, mask: torch.Tensor, task: torch.Tensor | None = None) -> None:
        """Fold raw `targets (B, L, G)` where `mask (B, L)` is true into mu/nu (each window into its `task`'s);
        rescale w, b to preserve outputs. No host sync: tasks without data in the batch keep their statistics.

        Under torch.distributed the batch moments are averaged over processes, so every replica stays equal.
        """
        if not self.enabled:
            return
        n_gammas = targets.shape[-1]
        weight = mask.to(torch.float64).reshape(mask.shape[0], -1, 1)  # (B, L, 1)
        t = targets.to(torch.float64).reshape(targets.shape[0], -1, n_gammas)  # (B, L, G)
        per_window = torch.stack(
            [(t * weight).sum(1), (t.square() * weight).sum(1), weight.sum(1).expand(-1, n_gammas)]
        )  # (3, B, G)
        if self.n_tasks == 1:
            stats = per_window.sum(1, keepdim=True)  # (3, 1, G)
        else:
            ids = _task_ids(task, self.n_tasks)
            stats = per_window.new_zeros(3, self.n_tasks, n_gammas).index_add_(1, ids, per_window)  # (3, T, G)
        if dist.is_available() and dist.is_initialized():
            dist.all_reduce(stats)
        mu, nu, w, b = (x.view(self.n_tasks, n_gammas) for x in (self.mu, self.nu, self.w.data, self.b.data))
        updates = self.updates.view(self.n_tasks, 1)
        count = stats[2]  # (T, G)
        has = count > 0
        mean, mean_sq = stats[0] / count.clamp(min=1.0), stats[1] / count.clamp(min=1.0)  # (T, G)
        old_mu, old_sigma = mu.clone(), self.sigma.view(self.n_tasks, n_gammas)
        updates.add_(has[:, :1].to(updates.dtype))
        first = has & (updates == 1)  # start from the first batch, with the prior's sigma = 1 as a floor
        later = has & ~first  # the untrained outputs of a first batch are not worth preserving
        first_nu = mean.square() + (mean_sq - mean.square()).clamp(min=1.0)
        mu.copy_(torch.where(first, mean, torch.where(later, (1 - self.beta) * mu + self.beta * mean, mu)))
        nu.copy_(torch.where(first, first_nu, torch.where(later, (1 - self.beta) * nu + self.beta * mean_sq, nu)))
        new_sigma = self.sigma.view(self.n_tasks, n_gammas)
        rescaled_b = (old_sigma * b.to(torch.float64) + old_mu - mu) / new_sigma
        w.copy_(torch.where(later, w * (old_sigma / new_sigma).to(w.dtype), w))
        b.copy_(torch.where(later, rescaled_b.to(b.dtype), b))

    def stats(self) -> dict[str, float]:
        """Mean mu, sigma, w, b over discount factors (and tasks) for logging."""
        return {
            "popart_mu": float(self.mu.mean()),
            "popart_sigma": float(self.sigma.mean()),
            "popart_w": float(self.w.detach().mean()),
            "popart_b": float(self.b.detach().mean()),
        }


def _task_ids(task: torch.Tensor | None, n_tasks: int) -> torch.Tensor:
    """The batch's task ids (B,); ValueError without them."""
    if task is None:
        raise ValueError(f"PopArt with {n_tasks} tasks needs the batch's task ids (B,): Batch.task")
    return task
