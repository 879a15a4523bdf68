"""Timestep encoders `(obs dict (B, L, ...), rl2 (B, L, 1 + A)) -> (B, L, D)`: `ff` and multi-modal `cnn`; both
embed text keys (word ids) with `TextFeatures` beside the other features.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.config.nets import CnnTstepConfig, FFTstepConfig
from amago_pipe.errors import ConfigError
from amago_pipe.nets.base import TstepEncoder
from amago_pipe.nets.cnn import build_cnn, random_shift
from amago_pipe.nets.layers import RunningNorm, activation, mlp, norm_layer
from amago_pipe.nets.obs_features import (
    KeyPlan,
    TextFeatures,
    check_obs,
    image_batch,
    module_key,
    plan_keys,
    vector_features,
)
from amago_pipe.nets.onednn_linear import Linear
from amago_pipe.spec import DataSpec

POOLED = 4
"""Side of the average-pooled grid each image channel contributes to the observation features."""


def _vector_input(obs: dict[str, torch.Tensor], plans: list[KeyPlan], like: torch.Tensor) -> torch.Tensor:
    """Concatenated vector features `(B, L, sum of widths)` (width 0 when there are none)."""
    feats = [vector_features(obs[p.key], p) for p in plans]
    if not feats:
        return like.new_zeros(*like.shape[:2], 0)
    return torch.cat(feats, dim=-1).to(like.dtype)


def _text_input(obs: dict[str, torch.Tensor], text: TextFeatures | None, like: torch.Tensor) -> torch.Tensor:
    """Pooled text features `(B, L, width)` (width 0 without text keys)."""
    if text is None:
        return like.new_zeros(*like.shape[:2], 0)
    return text(obs).to(like.dtype)  # type: ignore[no-any-return]


class FFTstepEncoder(TstepEncoder):
    """MLP over all observation keys (flattened; bounded integer keys one-hot; text keys embedded) and rl2."""

    def __init__(self, *, spec: DataSpec, cfg: FFTstepConfig):
        super().__init__()
        plans = plan_keys(spec, cfg, images=False)
        self.plans = [p for p in plans if p.kind == "vector"]
        text_plans = [p for p in plans if p.kind == "text"]
        self.text = TextFeatures(text_plans, cfg.text) if text_plans else None
        self.rl2_dim, self.hide_rl2 = spec.rl2_dim, cfg.hide_rl2
        obs_dim = sum(p.width for p in self.plans)
        text_dim = self.text.width if self.text is not None else 0
        self.obs_norm: nn.Module = RunningNorm(obs_dim) if cfg.normalize_inputs and obs_dim else nn.Identity()
        d_in = obs_dim + text_dim + self.rl2_dim
        self.net = mlp(d_in, cfg.d_hidden, cfg.n_layers, cfg.d_output, act=cfg.activation)
        self.out_norm = norm_layer(cfg.out_norm, cfg.d_output)
        self.out_dim, self.feature_dim = cfg.d_output, obs_dim

    def forward(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> torch.Tensor:
        return self.embed(obs, rl2)[0]

    def embed(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The embedding and the normalised observation vector (text keys, learned features, are not in it)."""
        check_obs(obs, self.plans + (self.text.plans if self.text is not None else []), rl2, self.rl2_dim)
        x = self.obs_norm(_vector_input(obs, self.plans, rl2))  # (B, L, obs_dim)
        words = _text_input(obs, self.text, rl2)  # (B, L, text_dim)
        shown = shown_rl2(rl2, self.hide_rl2)
        out = self.out_norm(self.net(torch.cat((x, words, shown), dim=-1)))  # (B, L, D)
        return out, (x if self.feature_dim else None)


class CnnTstepEncoder(TstepEncoder):
    """One CNN per image key, an MLP over vector keys + rl2, merged by a linear layer (any mix of keys)."""

    def __init__(self, *, spec: DataSpec, cfg: CnnTstepConfig):
        super().__init__()
        plans = plan_keys(spec, cfg, images=True)
        self.image_plans = [p for p in plans if p.kind == "image"]
        self.vector_plans = [p for p in plans if p.kind == "vector"]
        text_plans = [p for p in plans if p.kind == "text"]
        self.text = TextFeatures(text_plans, cfg.text) if text_plans else None
        if not self.image_plans:
            shapes = {k: a.shape for k, a in spec.observations.items()}
            raise ConfigError(
                f"tstep_encoder: the cnn encoder found no image observation (keys and shapes: {shapes}); "
                "use `type: ff`, or mark a key with `keys: {<key>: {use: image}}`",
                path="tstep_encoder.type",
            )
        self.cfg, self.rl2_dim = cfg, spec.rl2_dim
        self.cnns = nn.ModuleDict()
        self.img_heads = nn.ModuleDict()
        self.img_norms = nn.ModuleDict()
        for p in self.image_plans:
            if cfg.normalize_images:
                self.img_norms[_safe(p.key)] = RunningNorm(p.image_chw[0], feature_dim=1)
            cnn = build_cnn(p.cnn, p.image_chw, act=cfg.activation, impala_channels=cfg.impala_channels)
            self.cnns[_safe(p.key)] = cnn
            self.img_heads[_safe(p.key)] = nn.Sequential(
                Linear(cnn.out_dim, cfg.img_features), activation(cfg.activation)
            )
        vec_dim = sum(p.width for p in self.vector_plans)
        text_dim = self.text.width if self.text is not None else 0
        self.vec_norm: nn.Module = RunningNorm(vec_dim) if cfg.normalize_vectors and vec_dim else nn.Identity()
        self.vec_head = nn.Sequential(
            Linear(vec_dim + text_dim + self.rl2_dim, cfg.vector_features), activation(cfg.activation)
        )
        merged = cfg.img_features * len(self.image_plans) + cfg.vector_features
        self.merge = Linear(merged, cfg.d_output)
        self.out_norm = norm_layer(cfg.out_norm, cfg.d_output)
        self.out_dim = cfg.d_output
        self.feature_dim = vec_dim + sum(p.image_chw[0] * POOLED**2 for p in self.image_plans)

    def forward(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> torch.Tensor:
        return self._encode(obs, rl2, features=False)[0]

    def embed(self, obs: dict[str, torch.Tensor], rl2: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The embedding and the observation features: normalised vectors, then each image (normalised, before
        augmentation) average-pooled to `POOLED` x `POOLED` per channel."""
        return self._encode(obs, rl2, features=True)

    def _encode(
        self, obs: dict[str, torch.Tensor], rl2: torch.Tensor, *, features: bool
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        text_plans = self.text.plans if self.text is not None else []
        check_obs(obs, self.image_plans + self.vector_plans + text_plans, rl2, self.rl2_dim)
        batch, length = rl2.shape[:2]
        parts, pooled = [], []
        for p in self.image_plans:
            name = _safe(p.key)
            imgs = image_batch(obs[p.key], p).to(rl2.dtype)  # (B*L, C, H, W)
            if name in self.img_norms:
                imgs = self.img_norms[name](imgs)  # per channel, statistics over batch and pixels
            if features:  # (not in acting, whose exports need no pooling op)
                pooled.append(F.adaptive_avg_pool2d(imgs, POOLED).reshape(batch, length, -1))
            if self.training and self.cfg.drqv2_aug:
                imgs = random_shift(imgs, self.cfg.aug_pad, self.cfg.aug_fraction)
            feats = self.img_heads[name](self.cnns[name](imgs))  # (B*L, img_features)
            parts.append(feats.view(batch, length, -1))
        vec = self.vec_norm(_vector_input(obs, self.vector_plans, rl2))  # (B, L, vec_dim)
        words = _text_input(obs, self.text, rl2)  # (B, L, text_dim)
        shown = shown_rl2(rl2, self.cfg.hide_rl2)
        parts.append(self.vec_head(torch.cat((vec, words, shown), dim=-1)))  # (B, L, vector_features)
        out = self.out_norm(self.merge(torch.cat(parts, dim=-1)))  # (B, L, D)
        return out, (torch.cat([vec, *pooled], dim=-1) if features else None)


def shown_rl2(rl2: torch.Tensor, hide: bool | str) -> torch.Tensor:
    """`rl2` (previous reward, then action features) with the parts `hide_rl2` hides set to zero."""
    if hide == "action":
        return torch.cat((rl2[..., :1], torch.zeros_like(rl2[..., 1:])), dim=-1)
    return torch.zeros_like(rl2) if hide else rl2


_safe = module_key
