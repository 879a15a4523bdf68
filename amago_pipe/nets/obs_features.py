"""Route each observation key of a DataSpec to an image, a vector or a text input, and turn tensors into features.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from amago_pipe.config.nets import CnnTstepConfig, ObsKeyConfig, TextFeaturesConfig, TstepEncoderConfig
from amago_pipe.errors import ConfigError, DataError, did_you_mean
from amago_pipe.spec import ArraySpec, DataSpec
from amago_pipe.tokens import PAD_ID, UNKNOWN_ID

MAX_ONE_HOT = 256
"""Integer observations whose bounds span at most this many values are one-hot encoded."""
MAX_ONE_HOT_WIDTH = 1024
"""...and, for vectors, when the encoding has at most this many features."""


@dataclass(frozen=True)
class KeyPlan:
    """How one observation key enters the network."""

    key: str
    kind: str
    """`image`, `vector` or `text` (token ids)."""
    shape: tuple[int, ...]
    """Per-step shape from the DataSpec."""
    width: int = 0
    """Feature width of a vector key."""
    one_hot: int = 0
    """Classes per element when an integer key is one-hot encoded (0: not)."""
    strict: bool = False
    """Ids outside the classes are a DataError (a key's `one_hot` setting; checked in eager mode only, a host sync
    per batch on a GPU; clamped under `compile: true` and in exports) rather than clamped (the automatic one-hot
    of bounded scalars)."""
    low: int = 0
    """Smallest value of a one-hot key."""
    scale: float = 1.0
    """Multiplier applied after the float cast (1/255 for uint8)."""
    channels_first: bool = False
    cnn: str = "nature"
    vocab: int = 0
    """Ids of a text key (vocabulary + padding + unknown)."""

    @property
    def image_chw(self) -> tuple[int, int, int]:
        """(C, H, W) of an image key."""
        classes = max(1, self.one_hot)
        if len(self.shape) == 2:
            return (classes, *self.shape)
        c, h, w = self.shape if self.channels_first else (self.shape[2], self.shape[0], self.shape[1])
        return (c * classes, h, w)


def plan_keys(spec: DataSpec, cfg: TstepEncoderConfig, *, images: bool) -> list[KeyPlan]:
    """One KeyPlan per used observation key, sorted by key; `images` lets 2/3-d keys become images."""
    unknown = sorted(set(cfg.keys) - set(spec.observations))
    if unknown:
        known = sorted(spec.observations)
        raise ConfigError(
            f"tstep_encoder.keys: unknown observation key '{unknown[0]}' (the data has: {', '.join(known)})"
            f"{did_you_mean(unknown[0], known)}",
            path="tstep_encoder.keys",
        )
    plans = []
    for key in sorted(spec.observations):
        arr, over = spec.observations[key], cfg.keys.get(key, ObsKeyConfig())
        if over.use == "ignore":
            continue
        if arr.text is not None:
            plans.append(_text_plan(key, arr, over))
            continue
        as_image = over.use == "image" or (over.use == "auto" and images and len(arr.shape) == 3)
        if as_image:
            plans.append(_image_plan(key, arr, over, cfg, images))
        else:
            plans.append(_vector_plan(key, arr, over.one_hot))
    return plans


def _text_plan(key: str, arr: ArraySpec, over: ObsKeyConfig) -> KeyPlan:
    """A text key: its token ids go to the text features (`tstep_encoder.text`), never read as numbers."""
    if over.use != "auto" or over.one_hot is not None:
        where = f"tstep_encoder.keys.{key}"
        raise ConfigError(
            f"{where}: '{key}' holds word ids of a text (vocabulary of {arr.text.vocab_size if arr.text else 0}); it "
            "is embedded as text (`tstep_encoder.text`): drop `use`/`one_hot` for it, or `use: ignore`",
            path=where,
        )
    vocab = arr.text.vocab_size if arr.text is not None else 0
    return KeyPlan(key, "text", arr.shape, width=0, vocab=vocab)


def _check_one_hot(key: str, arr: ArraySpec, classes: int | None) -> int:
    """The classes of a key's `one_hot` setting (0 when unset or 0); ConfigError unless the key holds integers."""
    if not classes:
        return 0
    if not arr.dtype.startswith(("int", "uint", "bool")):
        where = f"tstep_encoder.keys.{key}.one_hot"
        raise ConfigError(
            f"{where}: '{key}' holds {arr.dtype} values; one_hot needs integer ids (drop it for this key)", path=where
        )
    return classes


def _vector_plan(key: str, arr: ArraySpec, one_hot: int | None = None) -> KeyPlan:
    size = max(1, math.prod(arr.shape))
    if one_hot:
        classes = _check_one_hot(key, arr, one_hot)
        return KeyPlan(key, "vector", arr.shape, width=size * classes, one_hot=classes, strict=True)
    n = _auto_classes(arr) if one_hot is None else 0
    if n:
        return KeyPlan(key, "vector", arr.shape, width=size * n, one_hot=n, low=int(arr.low or 0))
    return KeyPlan(key, "vector", arr.shape, width=size, scale=1.0 / 255.0 if arr.dtype == "uint8" else 1.0)


def _auto_classes(arr: ArraySpec) -> int:
    """Classes of the automatic one-hot of a bounded integer key (0: read it as numbers). Scalars with 2 to 256
    values; vectors (not uint8, often pixel rows or bytes) whose bounds, shared by all elements, span 3 to 256
    values, with at most 1,024 features per key (MultiDiscrete, a grid position); 0/1 elements are fine as
    numbers."""
    if not arr.dtype.startswith(("int", "uint")) or arr.low is None or arr.high is None:
        return 0
    n = int(arr.high) - int(arr.low) + 1
    if arr.shape == ():
        return n if 1 < n <= MAX_ONE_HOT else 0
    fits = 2 < n <= MAX_ONE_HOT and math.prod(arr.shape) * n <= MAX_ONE_HOT_WIDTH
    return n if fits and arr.dtype != "uint8" else 0


def _image_plan(key: str, arr: ArraySpec, over: ObsKeyConfig, cfg: TstepEncoderConfig, images: bool) -> KeyPlan:
    where = f"tstep_encoder.keys.{key}"
    if not images:
        raise ConfigError(f"{where}.use: the '{cfg.type}' encoder takes no images; use `type: cnn`", path=where)
    if len(arr.shape) not in (2, 3):
        raise ConfigError(
            f"{where}.use: image keys need shape (H, W), (H, W, C) or (C, H, W); '{key}' has shape {arr.shape}",
            path=where,
        )
    default_first = cfg.channels_first if isinstance(cfg, CnnTstepConfig) else None
    channels_first = over.channels_first if over.channels_first is not None else default_first
    if channels_first is None and len(arr.shape) == 3:
        channels_first = _infer_channels_first(arr.shape)
        if channels_first is None:
            raise ConfigError(
                f"{where}: cannot tell the channel axis of image '{key}' with shape {arr.shape}; "
                f"set tstep_encoder.channels_first (or keys.{key}.channels_first) to true or false",
                path=where,
            )
    cnn = over.cnn or (cfg.cnn if isinstance(cfg, CnnTstepConfig) else "nature")
    classes = _check_one_hot(key, arr, over.one_hot)
    scale = 1.0 / 255.0 if arr.dtype == "uint8" and not classes else 1.0
    return KeyPlan(
        key,
        "image",
        arr.shape,
        scale=scale,
        channels_first=bool(channels_first),
        cnn=cnn,
        one_hot=classes,
        strict=bool(classes),
    )


def _infer_channels_first(shape: tuple[int, ...]) -> bool | None:
    """(C, H, W) or (H, W, C)? A square image decides (MiniGrid's one-hot (7, 7, 20) has more channels than
    pixels a side); otherwise the shorter end axis is the channels, if no longer than a side. None: cannot tell."""
    first, mid, last = shape
    if mid == last != first:
        return True
    if first == mid != last:
        return False
    if first == last:
        return None
    channels, sides = (first, (mid, last)) if first < last else (last, (first, mid))
    return first < last if channels <= min(sides) else None


def check_obs(obs: dict[str, torch.Tensor], plans: list[KeyPlan], rl2: torch.Tensor, rl2_dim: int) -> None:
    """DataError unless every planned key is present with `(B, L, *spec shape)` and rl2 is `(B, L, rl2_dim)`."""
    if rl2.dim() != 3 or rl2.shape[-1] != rl2_dim:
        raise DataError(f"tstep encoder: rl2 must have shape (B, L, {rl2_dim}), got {tuple(rl2.shape)}")
    for plan in plans:
        if plan.key not in obs:
            raise DataError(f"tstep encoder: observation '{plan.key}' is missing (got keys: {sorted(obs)})")
        found = tuple(obs[plan.key].shape)
        if found[:2] != tuple(rl2.shape[:2]) or found[2:] != plan.shape:
            raise DataError(
                f"tstep encoder: observation '{plan.key}' has shape {found}, expected "
                f"{(*rl2.shape[:2], *plan.shape)} (B, L, *shape from the data spec)"
            )


def vector_features(x: torch.Tensor, plan: KeyPlan) -> torch.Tensor:
    """`(B, L, *shape)` -> `(B, L, width)` float features (one-hot for one-hot keys)."""
    if plan.one_hot:
        return one_hot(x, plan).reshape(*x.shape[:2], plan.width)  # (B, L, width)
    flat = x.reshape(*x.shape[:2], plan.width).float()  # (B, L, width)
    return flat * plan.scale if plan.scale != 1.0 else flat


def image_batch(x: torch.Tensor, plan: KeyPlan) -> torch.Tensor:
    """`(B, L, *shape)` -> `(B * L, C, H, W)` float images (uint8 scaled to [0, 1]; one-hot: C x classes)."""
    imgs = x.reshape(-1, *plan.shape)  # (B*L, *shape)
    if len(plan.shape) == 2:
        imgs = imgs[:, None]  # (B*L, 1, H, W)
    elif not plan.channels_first:
        imgs = imgs.permute(0, 3, 1, 2)  # (B*L, C, H, W)
    if plan.one_hot:  # (B*L, C, H, W, n) -> (B*L, C*n, H, W)
        return one_hot(imgs, plan).permute(0, 1, 4, 2, 3).flatten(1, 2)
    imgs = imgs.float()
    return imgs * plan.scale if plan.scale != 1.0 else imgs


def one_hot(x: torch.Tensor, plan: KeyPlan) -> torch.Tensor:
    """Integer ids -> float one-hot `(*x.shape, classes)`; ids outside the classes are clamped, or a DataError
    for a strict plan (checked in eager mode; clamped in a traced, exported or compiled program)."""
    idx = x.long() - plan.low
    if (
        plan.strict
        and not (torch.jit.is_tracing() or torch.compiler.is_compiling())
        and bool(((idx < 0) | (idx >= plan.one_hot)).any())
    ):
        raise DataError(
            f"tstep encoder: observation '{plan.key}' has ids from {int(x.min())} to {int(x.max())}; its one-hot "
            f"encoding takes ids in [0, {plan.one_hot}): set tstep_encoder.keys.{plan.key}.one_hot above the largest"
        )
    return F.one_hot(idx.clamp(0, plan.one_hot - 1), plan.one_hot).float()


class TextFeatures(nn.Module):
    """Word ids `(B, L, T)` of each text key -> learned word embeddings pooled over the words -> `(B, L, width)`."""

    def __init__(self, plans: list[KeyPlan], cfg: TextFeaturesConfig):
        super().__init__()
        self.plans, self.pool, self.d_embed = plans, cfg.pool, cfg.d_embed
        self.embeds = nn.ModuleDict({module_key(p.key): nn.Embedding(p.vocab, cfg.d_embed, PAD_ID) for p in plans})
        self.grus = nn.ModuleDict()
        if cfg.pool == "gru":
            self.grus.update({module_key(p.key): nn.GRU(cfg.d_embed, cfg.d_embed, batch_first=True) for p in plans})
        self.width = cfg.width * len(plans)

    def forward(self, obs: dict[str, torch.Tensor]) -> torch.Tensor:
        return torch.cat([self._key(obs[p.key], p) for p in self.plans], dim=-1)  # (B, L, width)

    def _key(self, ids: torch.Tensor, plan: KeyPlan) -> torch.Tensor:
        """`(B, L, T)` ids of one key -> `(B, L, d)` pooled features (zeros for an empty text)."""
        ids = ids.long()
        ids = torch.where((ids < 0) | (ids >= plan.vocab), torch.full_like(ids, UNKNOWN_ID), ids)  # (B, L, T)
        emb = self.embeds[module_key(plan.key)](ids)  # (B, L, T, E), zero rows at padding
        words = ids != PAD_ID  # (B, L, T)
        count = words.sum(-1, keepdim=True)  # (B, L, 1)
        if self.pool == "gru":
            out, _ = self.grus[module_key(plan.key)](emb.flatten(0, 1))  # (B*L, T, E)
            last = (count.flatten(0, 1) - 1).clamp(min=0)  # (B*L, 1) index of the last word
            final = out.gather(1, last[:, :, None].expand(-1, 1, self.d_embed))[:, 0]  # (B*L, E)
            return final.view(*ids.shape[:2], -1) * (count > 0).to(emb.dtype)  # (B, L, E)
        mean = emb.sum(-2) / count.clamp(min=1).to(emb.dtype)  # (B, L, E)
        if self.pool == "mean":
            return mean
        top = emb.masked_fill(~words[..., None], -1e4).amax(-2) * (count > 0).to(emb.dtype)  # (B, L, E)
        return top if self.pool == "max" else torch.cat((mean, top), dim=-1)  # (B, L, 2E)


def module_key(key: str) -> str:
    """ModuleDict keys may not contain '.'; observation keys may (and '/' from nested dicts)."""
    return key.replace(".", "_dot_").replace("/", "__")
