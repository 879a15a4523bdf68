"""The history objective (`history_coeff`): the sequence model learns to recall its own inputs.

From the state at step t a small head predicts the observation features of step t - k, for one k drawn uniformly from
1..t per step (t counted within the window). A model that keeps what it saw can answer; one that forgets cannot, so
the objective trains the memory pathways every memory task needs without fitting the actor to the data's actions.
Pure torch; must not import stores, YAML, pipelines or envs.
"""

from __future__ import annotations

import torch
from torch import nn

from amago_pipe.nets.onednn_linear import Linear


def earlier_steps(obs_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """For each step t of (B, T) windows: k drawn uniformly from 1..t, the source step t - k, and which steps count.

    Returns k (B, T) int64, source (B, T) int64 (0 where t = 0) and valid (B, T) bool (valid steps with t >= 1).
    """
    bsz, length = obs_mask.shape
    pos = torch.arange(length, device=obs_mask.device).expand(bsz, length)  # (B, T) step within the window
    k = (torch.rand(bsz, length, device=obs_mask.device) * pos).long() + 1  # floor(U * t) + 1 in 1..t
    return k, (pos - k).clamp(min=0), obs_mask & (pos >= 1)


class HistoryHead(nn.Module):
    """Predicts the observation features (`SequenceModel.encode`) of the step k back from a state and k."""

    def __init__(self, d_state: int, d_embedding: int, max_len: int, *, d_hidden: int = 128):
        super().__init__()
        self.offset = nn.Embedding(max_len, d_state)
        self.net = nn.Sequential(Linear(d_state, d_hidden), nn.LeakyReLU(), Linear(d_hidden, d_embedding))

    def loss(self, states: torch.Tensor, features: torch.Tensor, obs_mask: torch.Tensor) -> torch.Tensor:
        """Mean squared error over the valid steps t >= 1 of the windows.

        states (B, T, D) with gradient, features (B, T, F) (the targets: detached here), obs_mask (B, T) bool.
        """
        k, source, valid = earlier_steps(obs_mask)
        target = features.detach().gather(1, source[..., None].expand(-1, -1, features.shape[-1]))  # (B, T, F)
        pred = self.net(states + self.offset(k))
        err = (pred.float() - target.float()).square().mean(-1)  # (B, T)
        weight = valid.to(err.dtype)
        return (err * weight).sum() / weight.sum().clamp(min=1.0)
