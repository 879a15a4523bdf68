"""Route each observation key of a DataSpec to an image or a vector input, and turn tensors into features.
Pure torch; must not import stores, YAML or pipelines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from amago_pipe.config.nets import CnnTstepConfig, ObsKeyConfig, TstepEncoderConfig
from amago_pipe.errors import ConfigError, DataError, did_you_mean
from amago_pipe.spec import ArraySpec, DataSpec

MAX_ONE_HOT = 256
"""Integer observations whose bounds span at most this many values are one-hot encoded."""
MAX_ONE_HOT_WIDTH = 1024
"""...and, for vectors, when the encoding has at most this many features."""


@dataclass(frozen=True)
class KeyPlan:
    """How one observation key enters the network."""

    key: str
    kind: str
    """`image` or `vector`."""
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
        as_image = over.use == "image" or (over.use == "auto" and images and len(arr.shape) == 3)
        if as_image:
            plans.append(_image_plan(key, arr, over, cfg, images))
        else:
            plans.append(_vector_plan(key, arr, over.one_hot))
    return plans


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
