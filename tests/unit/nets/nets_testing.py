"""Helpers shared by the network tests (imported as a plain module from this folder)."""

from __future__ import annotations

import torch

from amago_pipe.spec import DataSpec


def random_obs(spec: DataSpec, batch: int, length: int) -> dict[str, torch.Tensor]:
    """Random observations `(B, L, *shape)` matching the spec's dtypes and bounds."""
    obs = {}
    for key, arr in spec.observations.items():
        shape = (batch, length, *arr.shape)
        if arr.dtype == "uint8":
            obs[key] = torch.randint(0, 256, shape, dtype=torch.uint8)
        elif arr.dtype.startswith("int"):
            obs[key] = torch.randint(int(arr.low or 0), int(arr.high or 9) + 1, shape)
        else:
            obs[key] = torch.randn(shape)
    return obs
