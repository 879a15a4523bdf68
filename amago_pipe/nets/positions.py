"""Position embeddings of the absolute timestep: sinusoidal, learned table, rotary (applied to q and k).

Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math

import torch
from torch import nn


def _inverse_frequencies(dim: int, device: torch.device) -> torch.Tensor:
    return torch.exp(torch.arange(0, dim, 2, device=device, dtype=torch.float32) * (-math.log(10_000.0) / dim))


class SinusoidalTimeEmbedding(nn.Module):
    """Fixed sin/cos features of the timestep, computed on the fly (no maximum timestep)."""

    def __init__(self, d_model: int):
        super().__init__()
        self.d_model = d_model

    def forward(self, time: torch.Tensor) -> torch.Tensor:
        freqs = _inverse_frequencies(self.d_model, time.device)  # (ceil(D/2),)
        angles = time.to(torch.float32)[..., None] * freqs  # (B, L, ceil(D/2))
        emb = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # (B, L, 2*ceil(D/2))
        return emb[..., : self.d_model]  # (B, L, D)


class LearnedTimeEmbedding(nn.Module):
    """A learned table of `max_time` rows; timesteps beyond it share the last row."""

    def __init__(self, d_model: int, max_time: int):
        super().__init__()
        self.max_time = max_time
        self.table = nn.Embedding(max_time, d_model)
        nn.init.normal_(self.table.weight, std=0.02)

    def forward(self, time: torch.Tensor) -> torch.Tensor:
        return self.table(time.clamp(0, self.max_time - 1))  # (B, L, D)


class Rotary(nn.Module):
    """Rotary position embedding (GPT-NeoX half-split layout) of the absolute timestep."""

    def __init__(self, head_dim: int):
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rotary embeddings need an even head size, got {head_dim}")
        self.head_dim = head_dim

    def angles(self, time: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin of shape `(B, 1, L, head_dim / 2)` for `time (B, L)`."""
        freqs = _inverse_frequencies(self.head_dim, time.device)  # (Dh/2,)
        angles = time.to(torch.float32)[:, None, :, None] * freqs  # (B, 1, L, Dh/2)
        return angles.cos(), angles.sin()

    @staticmethod
    def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        """Rotate `x (B, H, L, Dh)` by the given angles."""
        x1, x2 = x.chunk(2, dim=-1)  # (B, H, L, Dh/2) each
        cos, sin = cos.to(x.dtype), sin.to(x.dtype)
        return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
