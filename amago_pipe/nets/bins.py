"""Value classification: symlog/symexp, bins uniform in symlog space, two-hot and HL-Gauss targets, decoding.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def symlog(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * log(1 + |x|)."""
    return torch.sign(x) * torch.log1p(x.abs())


def symexp(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * (exp(|x|) - 1), the inverse of symlog."""
    return torch.sign(x) * torch.expm1(x.abs())


def two_hot(x: torch.Tensor, centers: torch.Tensor) -> torch.Tensor:
    """Weights on the two bins around each `x (...)` (linear interpolation), `(..., num_bins)`; clipped to the range."""
    n = centers.shape[0]
    x = x.clamp(centers[0], centers[-1])
    low = (torch.searchsorted(centers, x.contiguous(), right=True) - 1).clamp(0, n - 2)  # (...)
    c_low, c_high = centers[low], centers[low + 1]
    w_high = ((x - c_low) / (c_high - c_low)).clamp(0.0, 1.0)
    out = torch.zeros(*x.shape, n, dtype=x.dtype, device=x.device)
    out.scatter_(-1, low[..., None], (1.0 - w_high)[..., None])
    out.scatter_add_(-1, (low + 1)[..., None], w_high[..., None])
    return out


def hl_gauss(x: torch.Tensor, centers: torch.Tensor, sigma: float) -> torch.Tensor:
    """Histogram loss target (Imani & White; Farebrother et al. 2024): a Gaussian at `x` integrated over bins."""
    half = (centers[1] - centers[0]) / 2
    edges = torch.cat((centers[:1] - half, centers + half))  # (num_bins + 1,)
    cdf = 0.5 * (1.0 + torch.erf((edges - x[..., None]) / (sigma * math.sqrt(2.0))))  # (..., num_bins + 1)
    mass = cdf[..., 1:] - cdf[..., :-1]  # (..., num_bins)
    return mass / mass.sum(-1, keepdim=True).clamp_min(1e-12)


class SymlogBins(nn.Module):
    """`num_bins` centres uniform in symlog space over [low, high]; encode values, decode logits."""

    centers: torch.Tensor

    def __init__(self, num_bins: int, low: float = -20.0, high: float = 20.0):
        super().__init__()
        self.register_buffer("centers", torch.linspace(low, high, num_bins), persistent=False)

    @property
    def num_bins(self) -> int:
        return int(self.centers.shape[0])

    @property
    def width(self) -> float:
        """Bin spacing in symlog space."""
        return float(self.centers[1] - self.centers[0])

    def two_hot(self, value: torch.Tensor) -> torch.Tensor:
        """Two-hot target `(..., num_bins)` of raw values `(...)`."""
        return two_hot(symlog(value), self.centers.to(value.dtype))

    def hl_gauss(self, value: torch.Tensor, sigma_bins: float = 0.75) -> torch.Tensor:
        """HL-Gauss target `(..., num_bins)`; sigma is `sigma_bins` bin widths (0.75 as recommended)."""
        return hl_gauss(symlog(value), self.centers.to(value.dtype), sigma_bins * self.width)

    def decode(self, logits: torch.Tensor) -> torch.Tensor:
        """Expected value `(...)` of logits `(..., num_bins)`, mapped back with symexp."""
        probs = logits.float().softmax(-1)
        return symexp((probs * self.centers).sum(-1))
