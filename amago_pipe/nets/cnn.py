"""Image encoders: the Nature (DQN) CNN, the IMPALA residual CNN, and DrQ-v2 random-shift augmentation.

Inputs are float `(N, C, H, W)`. Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.errors import ConfigError
from amago_pipe.nets.layers import activation


class NatureCNN(nn.Module):
    """Conv 8x8/4 (32) -> 4x4/2 (64) -> 3x3/1 (64), flattened; images must be at least 36x36."""

    def __init__(self, chw: tuple[int, int, int], act: str = "leaky_relu"):
        super().__init__()
        c, h, w = chw
        if h < 36 or w < 36:
            raise ConfigError(
                f"tstep_encoder.cnn: the nature CNN needs images of at least 36x36, got {h}x{w}; use cnn: impala"
            )
        self.net = nn.Sequential(
            nn.Conv2d(c, 32, 8, stride=4),
            activation(act),
            nn.Conv2d(32, 64, 4, stride=2),
            activation(act),
            nn.Conv2d(64, 64, 3, stride=1),
            activation(act),
            nn.Flatten(),
        )
        self.out_dim = _flat_size(self.net, chw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (N, out_dim)


class _ResidualBlock(nn.Module):
    def __init__(self, channels: int, act: str):
        super().__init__()
        self.net = nn.Sequential(
            activation(act),
            nn.Conv2d(channels, channels, 3, padding=1),
            activation(act),
            nn.Conv2d(channels, channels, 3, padding=1),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.net(x)


class ImpalaCNN(nn.Module):
    """IMPALA: per block conv 3x3 -> max-pool 3x3/2 -> two residual blocks; any image size."""

    def __init__(self, chw: tuple[int, int, int], channels: tuple[int, ...] = (16, 32, 32), act: str = "leaky_relu"):
        super().__init__()
        layers: list[nn.Module] = []
        c_in = chw[0]
        for c_out in channels:
            layers += [
                nn.Conv2d(c_in, c_out, 3, padding=1),
                nn.MaxPool2d(3, stride=2, padding=1),
                _ResidualBlock(c_out, act),
                _ResidualBlock(c_out, act),
            ]
            c_in = c_out
        layers += [activation(act), nn.Flatten()]
        self.net = nn.Sequential(*layers)
        self.out_dim = _flat_size(self.net, chw)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)  # (N, out_dim)


def _flat_size(net: nn.Module, chw: tuple[int, int, int]) -> int:
    with torch.no_grad():
        return int(net(torch.zeros(1, *chw)).shape[-1])


def build_cnn(
    kind: str, chw: tuple[int, int, int], *, act: str, impala_channels: tuple[int, ...]
) -> NatureCNN | ImpalaCNN:
    """`nature` or `impala` CNN for images of shape `chw`; the module has `out_dim`."""
    if kind == "nature":
        return NatureCNN(chw, act)
    if kind == "impala":
        return ImpalaCNN(chw, impala_channels, act)
    raise ConfigError(f"tstep_encoder.cnn: unknown CNN '{kind}' (known: nature, impala)")


def random_shift(images: torch.Tensor, pad: int, fraction: float = 1.0) -> torch.Tensor:
    """DrQ-v2 augmentation: replicate-pad by `pad` and crop back at a random integer offset per image.

    Only a random `fraction` of the images is shifted; the rest pass unchanged. `images (N, C, H, W)`.
    """
    if pad == 0 or fraction == 0.0:
        return images
    n, c, h, w = images.shape
    padded = F.pad(images, (pad, pad, pad, pad), mode="replicate")  # (N, C, H + 2p, W + 2p)
    dy = torch.randint(0, 2 * pad + 1, (n, 1), device=images.device)
    dx = torch.randint(0, 2 * pad + 1, (n, 1), device=images.device)
    rows = (torch.arange(h, device=images.device)[None] + dy)[:, None, :, None]  # (N, 1, H, 1)
    cols = (torch.arange(w, device=images.device)[None] + dx)[:, None, None, :]  # (N, 1, 1, W)
    shifted = padded.gather(2, rows.expand(n, c, h, w + 2 * pad)).gather(3, cols.expand(n, c, h, w))  # (N, C, H, W)
    if fraction >= 1.0:
        return shifted
    chosen = torch.rand(n, device=images.device) < fraction  # (N,)
    return torch.where(chosen[:, None, None, None], shifted, images)
