"""Small building blocks shared by the networks: activations, norms, sigma-reparam linears, MLPs, running norms.

Pure torch modules; must not import stores, YAML, pipelines or config loading.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.nets.onednn_linear import Linear
from amago_pipe.nets.onednn_linear import linear as fast_linear

ACTIVATIONS: dict[str, type[nn.Module]] = {
    "leaky_relu": nn.LeakyReLU,
    "gelu": nn.GELU,
    "relu": nn.ReLU,
    "silu": nn.SiLU,
}


def activation(name: str) -> nn.Module:
    """A fresh activation module by name (`leaky_relu`, `gelu`, `relu`, `silu`)."""
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation '{name}'; expected one of {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]()


class RMSNorm(nn.RMSNorm):
    """RMSNorm computed in its weight's dtype (float32 under autocast, like LayerNorm), output in the input's."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.to(self.weight.dtype)).to(x.dtype)


def norm_layer(kind: str, dim: int) -> nn.Module:
    """`layer` (LayerNorm), `rms` (RMSNorm) or `none` (identity) over the last axis of width `dim`."""
    if kind == "layer":
        return nn.LayerNorm(dim)
    if kind == "rms":
        return RMSNorm(dim)
    if kind == "none":
        return nn.Identity()
    raise ValueError(f"unknown norm '{kind}'; expected 'layer', 'rms' or 'none'")


def _tracing() -> bool:
    """Under jit tracing or scripting, torch.compile or torch.export (a reused tensor would be baked in, or is fake)."""
    return bool(
        torch.jit.is_tracing()
        or torch.jit.is_scripting()
        or torch.compiler.is_compiling()
        or torch.compiler.is_exporting()
    )


MASK_BITS = 16
"""Random bits per element of a dropout mask: the drop probability is rounded to a multiple of 2**-16."""


def dropout_mask(shape: torch.Size, p: float, dtype: torch.dtype) -> torch.Tensor:
    """Inverted-dropout multipliers of `shape`: 0 with probability `p` (to 2**-16), else 1 / (1 - p).

    CPU torch draws one 32-bit number per element of `bernoulli_` (~8 ns each); here each 64-bit draw gives four
    16-bit ones, so a mask costs ~40 % of `F.dropout`'s, from the same seeded generator.
    """
    n = math.prod(shape)
    bits = torch.empty((n + 3) // 4, dtype=torch.int64).random_(-(2**63), 2**63 - 1)  # (ceil(n / 4),)
    lanes = bits.view(torch.int16)[:n].view(shape)  # uniform over [-2**15, 2**15)
    keep = lanes >= round(p * 2**MASK_BITS) - 2 ** (MASK_BITS - 1)
    return keep.to(dtype).mul_(1.0 / (1.0 - p))


class _MaskedScale(torch.autograd.Function):
    """x * mask, saving only the mask (the input is not needed for its gradient)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(mask)
        return x * mask

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        (mask,) = ctx.saved_tensors
        return grad * mask, None


class Dropout(nn.Dropout):
    """`nn.Dropout` that costs nothing outside training (no kernel call: rollouts step through many of them); on
    the CPU in eager mode its mask comes from `dropout_mask`."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0:
            return x
        if x.device.type != "cpu" or self.p >= 1 or _tracing():
            return F.dropout(x, self.p, True, self.inplace)
        return _MaskedScale.apply(x, dropout_mask(x.shape, self.p, x.dtype))  # type: ignore[no-any-return]


class SigmaReparamLinear(nn.Module):
    """Linear layer with weight `gamma / sigma(W) * W` (sigma-reparam, arXiv:2303.06296).

    sigma(W) is the spectral norm, tracked by one power-iteration step per training forward
    (the `u`, `v` buffers); evaluation mode reuses the stored vectors, so it is deterministic.
    """

    u: torch.Tensor
    v: torch.Tensor

    def __init__(self, d_in: int, d_out: int, bias: bool = True):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(d_out, d_in))
        self.bias = nn.Parameter(torch.zeros(d_out)) if bias else None
        self.gamma = nn.Parameter(torch.ones(()))
        nn.init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            bound = 1.0 / math.sqrt(d_in)
            nn.init.uniform_(self.bias, -bound, bound)
        u, v = torch.randn(d_out), torch.randn(d_in)
        self.register_buffer("u", u / u.norm())
        self.register_buffer("v", v / v.norm())
        self._power_iteration(steps=20)  # start from a converged sigma, so evaluation before training is sane
        self._acting_weight: torch.Tensor | None = None
        self._acting_key: tuple[tuple[int, int], ...] = ()
        self.given_weight: torch.Tensor | None = None
        """An effective weight handed in from outside: a traced acting step takes them as inputs."""

    @torch.no_grad()
    def _power_iteration(self, steps: int = 1) -> None:
        for _ in range(steps):
            self.v.copy_(F.normalize(self.weight.t() @ self.u, dim=0, eps=1e-8))
            self.u.copy_(F.normalize(self.weight @ self.v, dim=0, eps=1e-8))

    def effective_weight(self) -> torch.Tensor:
        """`gamma / sigma * W` in float32 (even under autocast); updates u, v in training mode. Acting (evaluation
        mode without gradients) reuses the last one until a weight, gamma, u or v changes."""
        if self.given_weight is not None:
            return self.given_weight
        if not (self.training or torch.is_grad_enabled() or _tracing()):
            return self.acting_weight()
        if self.training:
            self._power_iteration()
        return self._weight_now()

    def acting_weight(self) -> torch.Tensor:
        """The effective weight for acting: computed again only after a weight, gamma, u or v changed."""
        key = tuple((t.data_ptr(), t._version) for t in (self.weight, self.gamma, self.u, self.v))
        if self._acting_weight is None or self._acting_key != key:
            with torch.no_grad():
                self._acting_weight, self._acting_key = self._weight_now(), key
        return self._acting_weight

    def _weight_now(self) -> torch.Tensor:
        with torch.autocast(self.weight.device.type, enabled=False):
            sigma = torch.dot(self.u, self.weight @ self.v)
            return self.weight * (self.gamma / sigma)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_linear(x, self.effective_weight(), self.bias)


def linear(d_in: int, d_out: int, *, sigma_reparam: bool = False, bias: bool = True) -> nn.Module:
    """`Linear` (`nn.Linear` on oneDNN), or `SigmaReparamLinear` when asked."""
    return SigmaReparamLinear(d_in, d_out, bias) if sigma_reparam else Linear(d_in, d_out, bias=bias)


def mlp(
    d_in: int,
    d_hidden: int,
    n_layers: int,
    d_out: int,
    *,
    act: str = "leaky_relu",
    dropout: float = 0.0,
    hidden_norm: str = "none",
) -> nn.Sequential:
    """`n_layers` hidden layers (linear, [norm], activation, [dropout]) followed by a linear output layer."""
    layers: list[nn.Module] = []
    width = d_in
    for _ in range(n_layers):
        layers += [Linear(width, d_hidden), norm_layer(hidden_norm, d_hidden), activation(act)]
        if dropout > 0:
            layers.append(Dropout(dropout))
        width = d_hidden
    layers.append(Linear(width, d_out))
    return nn.Sequential(*layers)


class RunningNorm(nn.Module):
    """Normalise features with running mean/variance (Chan's parallel update) collected in training mode.

    Statistics are updated by every training-mode forward and frozen in evaluation mode; until a
    first update the layer is the identity. `feature_dim` is the axis of the `dim` features (1 for `(N, C, H, W)`
    images: one mean/variance per channel); moments are taken over every other axis. `eps` is added to the
    variance: small enough to standardise 0/1 flags scaled by 1/255 (variance ~1e-6).
    """

    count: torch.Tensor
    mean: torch.Tensor
    var: torch.Tensor

    def __init__(self, dim: int, *, clip: float = 10.0, eps: float = 1e-8, feature_dim: int = -1):
        super().__init__()
        self.clip, self.eps, self.feature_dim = clip, eps, feature_dim
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))
        self.register_buffer("mean", torch.zeros(dim, dtype=torch.float64))
        self.register_buffer("var", torch.ones(dim, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Fold a batch into the statistics (folded in float64)."""
        axis = self.feature_dim % x.dim()
        n = x.numel() // max(1, x.shape[axis])
        if n == 0:
            return
        if axis == x.dim() - 1:  # vectors: float64 moments (learning runs are sensitive to the last bits)
            flat = x.reshape(-1, x.shape[-1]).to(torch.float64)  # (N, D)
            batch_mean, batch_var = flat.mean(0), flat.var(0, unbiased=False)
        else:  # images: float32 moments over batch and pixels, no float64 copy of every pixel
            dims = [d for d in range(x.dim()) if d != axis]
            batch_var, batch_mean = (m.double() for m in torch.var_mean(x.float(), dim=dims, unbiased=False))
        total = self.count + n
        delta = batch_mean - self.mean
        self.mean.add_(delta * n / total)
        m2 = self.var * self.count + batch_var * n + delta.square() * self.count * n / total
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.update(x)
        shape = [1] * x.dim()
        shape[self.feature_dim] = -1
        mean = self.mean.to(x.dtype).view(shape)
        std = (self.var + self.eps).sqrt().to(x.dtype).view(shape)
        normalized = ((x - mean) / std).clamp(-self.clip, self.clip)
        return torch.where(self.count > 0, normalized, x)  # no host sync on GPU
