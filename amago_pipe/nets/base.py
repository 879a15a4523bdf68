"""The two encoder interfaces every built-in and plugin network implements: TstepEncoder and TrajEncoder.

Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn

TrajState = dict[str, torch.Tensor]
"""Recurrent state of a trajectory encoder: named tensors, each with the batch on a documented axis."""


class TstepEncoder(nn.Module, ABC):
    """Maps each timestep `(obs dict of (B, L, ...), rl2 (B, L, 1 + A))` to a vector `(B, L, out_dim)`.

    Implementations are built as `Class(spec=DataSpec, cfg=their config)`; they treat every step
    independently (no mixing along L).
    """

    out_dim: int
    feature_dim: int = 0
    """Width of the observation features `embed` returns (0: it returns none)."""

    @abstractmethod
    def forward(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> torch.Tensor: ...

    def embed(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`(embedding (B, L, out_dim), observation features (B, L, feature_dim) or None)`: the features are the
        normalised inputs the history objective (`agent.history_coeff`) predicts; without them it predicts the
        embedding."""
        return self(obs, rl2), None


class TrajEncoder(nn.Module, ABC):
    """A causal sequence model `(seq (B, L, D), time (B, L) long, state) -> (out (B, L, out_dim), state)`.

    Implementations are built as `Class(d_in=D, max_seq_len=..., cfg=their config)`.
    Stepwise inference calls `forward` with L=1 (or any L) and the state returned by the previous
    call; it must equal the full-sequence forward. The state passed in is consumed (it may be
    updated in place): always continue from the returned one.
    """

    out_dim: int

    @abstractmethod
    def forward(
        self, seq: torch.Tensor, time: torch.Tensor, state: TrajState | None = None
    ) -> tuple[torch.Tensor, TrajState]: ...

    @abstractmethod
    def init_state(self, batch: int, device: torch.device | str | None = None) -> TrajState:
        """The empty state of `batch` environments (as if nothing was seen)."""

    @abstractmethod
    def reset(self, state: TrajState, done_mask: torch.Tensor) -> TrajState:
        """Forget the history of the environments where `done_mask (B,) bool` is true."""


def check_done_mask(done_mask: torch.Tensor, batch: int, where: str) -> torch.Tensor:
    """`done_mask` as a `(B,)` bool tensor, or ValueError naming what was found."""
    if done_mask.shape != (batch,):
        raise ValueError(f"{where}.reset: done_mask must have shape ({batch},), got {tuple(done_mask.shape)}")
    return done_mask.to(torch.bool)


def check_sequence(seq: torch.Tensor, time: torch.Tensor, d_in: int, where: str) -> None:
    """Raise ValueError unless `seq` is `(B, L, d_in)` and `time` is `(B, L)` integer."""
    if seq.dim() != 3 or seq.shape[-1] != d_in:
        raise ValueError(f"{where}: seq must have shape (B, L, {d_in}), got {tuple(seq.shape)}")
    if time.shape != seq.shape[:2]:
        raise ValueError(f"{where}: time must have shape {tuple(seq.shape[:2])} (B, L), got {tuple(time.shape)}")
    if time.dtype.is_floating_point:
        raise ValueError(f"{where}: time must hold integer timesteps, got {time.dtype}")
