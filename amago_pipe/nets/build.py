"""Factories from configs to modules (shapes from the DataSpec), and the SequenceModel that chains both encoders.

Pure torch + config dataclasses; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.config.nets import (
    ActorHeadConfig,
    CriticHeadConfig,
    ModelConfig,
    TrajEncoderConfig,
    TstepEncoderConfig,
)
from amago_pipe.errors import ConfigError
from amago_pipe.nets.base import TrajEncoder, TrajState, TstepEncoder
from amago_pipe.nets.heads import ActorHead, CriticEnsemble
from amago_pipe.spec import ActionSpec, DataSpec


def build_tstep_encoder(cfg: TstepEncoderConfig, spec: DataSpec) -> TstepEncoder:
    """The timestep encoder named by `cfg.type` (or a plugin), built as `Impl(spec=spec, cfg=cfg)`."""
    module = cfg.implementation()(spec=spec, cfg=cfg)
    _check_interface(module, TstepEncoder, cfg, "tstep_encoder")
    return module  # type: ignore[no-any-return]


def build_traj_encoder(cfg: TrajEncoderConfig, d_in: int, max_seq_len: int) -> TrajEncoder:
    """The trajectory encoder named by `cfg.type` (or a plugin), built as `Impl(d_in=, max_seq_len=, cfg=)`."""
    if max_seq_len < 1:
        raise ConfigError(f"traj_encoder: max_seq_len must be at least 1, got {max_seq_len}")
    module = cfg.implementation()(d_in=d_in, max_seq_len=max_seq_len, cfg=cfg)
    _check_interface(module, TrajEncoder, cfg, "traj_encoder")
    return module  # type: ignore[no-any-return]


def build_actor_head(cfg: ActorHeadConfig, d_state: int, action: ActionSpec, num_gammas: int) -> ActorHead:
    """An actor head with one distribution per discount factor."""
    return ActorHead(d_state, action, num_gammas, cfg)


def build_critic_head(cfg: CriticHeadConfig, d_state: int, action: ActionSpec, num_gammas: int) -> CriticEnsemble:
    """A fused ensemble of `cfg.num_critics` critics with one output per discount factor."""
    return CriticEnsemble(d_state, action, num_gammas, cfg)


def _check_interface(module: object, base: type, cfg: object, what: str) -> None:
    if not isinstance(module, base) or not hasattr(module, "out_dim"):
        raise ConfigError(
            f"{what}.type: '{getattr(cfg, 'type', '?')}' built a {type(module).__name__}, which is not a "
            f"{base.__module__}.{base.__name__} with an `out_dim`; plugins must subclass it",
            path=f"{what}.type",
        )


class SequenceModel(nn.Module):
    """TstepEncoder then TrajEncoder: `(obs, rl2, time, state) -> (out (B, L, out_dim), state)`."""

    def __init__(self, tstep_encoder: TstepEncoder, traj_encoder: TrajEncoder):
        super().__init__()
        self.tstep_encoder, self.traj_encoder = tstep_encoder, traj_encoder
        self.out_dim = traj_encoder.out_dim

    def forward(
        self, obs: dict[str, torch.Tensor], rl2: torch.Tensor, time: torch.Tensor, state: TrajState | None = None
    ) -> tuple[torch.Tensor, TrajState]:
        emb = self.tstep_encoder(obs, rl2)  # (B, L, D_tstep)
        return self.traj_encoder(emb, time, state)  # type: ignore[no-any-return]

    @property
    def feature_dim(self) -> int:
        """Width of the per-step features `encode` returns."""
        return self.tstep_encoder.feature_dim or self.tstep_encoder.out_dim

    def encode(
        self, obs: dict[str, torch.Tensor], rl2: torch.Tensor, time: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A whole window from a fresh state: `(out (B, L, out_dim), features (B, L, feature_dim))`, the features
        being the timestep encoder's observation features (or, without them, its layer-normalised embedding)."""
        emb, feats = self.tstep_encoder.embed(obs, rl2)  # (B, L, D_tstep), (B, L, F) or None
        if feats is None:
            feats = F.layer_norm(emb, emb.shape[-1:])
        return self.traj_encoder(emb, time, None)[0], feats

    def init_state(self, batch: int, device: torch.device | str | None = None) -> TrajState:
        return self.traj_encoder.init_state(batch, device)

    def reset(self, state: TrajState, done_mask: torch.Tensor) -> TrajState:
        return self.traj_encoder.reset(state, done_mask)


def build_sequence_model(cfg: ModelConfig, spec: DataSpec, max_seq_len: int) -> SequenceModel:
    """Both encoders of `cfg`, wired together (the trajectory encoder's input width is the tstep output)."""
    tstep = build_tstep_encoder(cfg.tstep_encoder, spec)
    return SequenceModel(tstep, build_traj_encoder(cfg.traj_encoder, tstep.out_dim, max_seq_len))
