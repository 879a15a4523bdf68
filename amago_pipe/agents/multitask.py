"""`multitask`: AMAGO-2's update — critics classify returns over symlog bins; advantage-filtered BC.

Shares every piece of `agent` except how critic outputs become values and how critics are trained
(two-hot or HL-Gauss cross-entropy, so the loss scale does not depend on each task's return scale).
Pure torch + nets; no stores, YAML, pipelines or envs.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from amago_pipe.agents.agent import Agent
from amago_pipe.agents.losses import critic_loss_bins
from amago_pipe.config.agent import AgentConfig, MultiTaskConfig
from amago_pipe.config.nets import ModelConfig
from amago_pipe.errors import ConfigError
from amago_pipe.spec import DataSpec


class MultiTaskAgent(Agent):
    """Agent whose critics output bin logits; PopArt only tracks the value scale (for the policy-gradient term)."""

    def __init__(
        self, spec: DataSpec, model_cfg: ModelConfig, cfg: AgentConfig, *, max_seq_len: int, tasks: Sequence[str] = ()
    ):
        if cfg.critic.output != "bins":
            raise ConfigError(
                "agent.critic.output: the multitask agent needs `output: bins`", path="agent.critic.output"
            )
        super().__init__(spec, model_cfg, cfg, max_seq_len=max_seq_len, tasks=tasks)
        self.labels = cfg.labels if isinstance(cfg, MultiTaskConfig) else "two_hot"
        self.hl_sigma = cfg.hl_sigma if isinstance(cfg, MultiTaskConfig) else 0.75
        self.popart.w.requires_grad_(False)  # outputs are bins: the affine part of PopArt is unused
        self.popart.b.requires_grad_(False)

    def values(
        self,
        out: torch.Tensor,
        *,
        raw: bool = False,
        axis: int = -1,
        detach: bool = False,
        task: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Bin logits (..., N) -> expected values, PopArt-normalised unless `raw`; G is on `axis`."""
        decoded = self.critic.values(out)  # (...)
        return decoded if raw else self.popart.normalize(decoded, axis=axis, task=task)

    def critic_objective(
        self, critic_out: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor, task: torch.Tensor | None = None
    ) -> torch.Tensor:
        """Cross-entropy of logits (K, B, L, G, N) against two-hot / HL-Gauss labels of the targets (B, L, G)."""
        bins = self.critic.bins
        if bins is None:  # cannot happen: checked in __init__
            raise ConfigError("agent.critic.output: the multitask agent needs `output: bins`")
        labels = bins.two_hot(targets) if self.labels == "two_hot" else bins.hl_gauss(targets, self.hl_sigma)
        return critic_loss_bins(critic_out.permute(1, 2, 0, 3, 4), labels, mask)  # (B, L, G, N) labels
