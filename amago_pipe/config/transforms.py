"""Env wrappers as typed components (`env: {wrappers: [{type: atari, ...}, {type: frame_stack, k: 4}]}`).

Config only: no torch, no gymnasium. The implementations live in `amago_pipe.envs.transforms` and are imported when
an env is built. A `type: package.module:Name` that is not a wrapper config is a plain wrapper (a gymnasium Wrapper
class or any function) called as `Name(env, **kwargs)`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

from amago_pipe.config.base import Component, config
from amago_pipe.config.build import FieldError, Problems, build, join
from amago_pipe.registry import Registry


class WrapperRegistry(Registry[Any]):
    """The `wrapper` registry: a `module:Name` that is no WrapperConfig (nor has one as `Config`) reads as a
    PluginWrapperConfig, so any gymnasium Wrapper class or `env -> env` function is a plugin as it is."""

    def get(self, name: str, *, where: str | None = None) -> Any:
        target = super().get(name, where=where)
        if ":" in name and not _is_wrapper_config(getattr(target, "Config", target)):
            return PluginWrapperConfig
        return target


def _is_wrapper_config(obj: Any) -> bool:
    return isinstance(obj, type) and dataclasses.is_dataclass(obj) and issubclass(obj, WrapperConfig)


WRAPPERS = WrapperRegistry("wrapper")
"""Env wrappers applied to every env an EnvConfig makes: atari, frame_stack, resize, grayscale, success_on_reward."""


@config
class WrapperConfig(Component):
    """An env wrapper, applied (in list order) to each env an EnvConfig makes, in every stage and in `play`."""

    registry = WRAPPERS

    def make_kwargs(self) -> dict[str, Any]:
        """Keyword arguments this wrapper needs `gymnasium.make(id, ...)` to be given (an `id` env only)."""
        return {}


@config
class ImageWrapperConfig(WrapperConfig):
    """A wrapper of one image observation: the observation itself, or one key of a Dict observation."""

    key: str | None = None
    """Key of a Dict observation to transform (e.g. MiniGrid's `image`); null: the observation itself, or the one
    image key of a Dict."""


@config
class AtariConfig(WrapperConfig):
    """ALE (ale-py) preprocessing as in Machado et al. 2018: sticky actions in the emulator, each action repeated
    `frame_skip` frames (the observation is the max of the last two), up to `noop_max` random no-ops after reset."""

    impl: ClassVar[str] = "amago_pipe.envs.transforms_atari:AtariPreprocessing"
    type: str = "atari"
    """Registered name or `package.module:Class` of a plugin."""
    frame_skip: int = 4
    """Emulator frames per agent step (rewards summed); the env itself is made with `frameskip=1`."""
    sticky_actions: float = 0.25
    """Probability that the emulator repeats the previous action at each frame (ALE's
    `repeat_action_probability`)."""
    noop_max: int = 30
    """At most this many no-op actions after each reset (a number drawn uniformly in [1, noop_max]; 0: none)."""
    terminal_on_life_loss: bool = False
    """End the episode (terminated) when a life is lost; the next reset starts a new game."""

    def __post_init__(self) -> None:
        if self.frame_skip < 1:
            raise FieldError("frame_skip", f"must be at least 1, got {self.frame_skip}")
        if not (0.0 <= self.sticky_actions < 1.0 and math.isfinite(self.sticky_actions)):
            raise FieldError("sticky_actions", f"must be a probability in [0, 1), got {self.sticky_actions}")
        if self.noop_max < 0:
            raise FieldError("noop_max", f"must be >= 0, got {self.noop_max}")

    def make_kwargs(self) -> dict[str, Any]:
        return {"frameskip": 1, "repeat_action_probability": self.sticky_actions}


@config
class FrameStackConfig(ImageWrapperConfig):
    """The last `k` observations side by side on the channel (last) axis: (H, W, C) -> (H, W, k*C), (H, W) ->
    (H, W, k), vectors (D,) -> (k*D,); oldest first, the first observation repeated after a reset."""

    impl: ClassVar[str] = "amago_pipe.envs.transforms:FrameStack"
    type: str = "frame_stack"
    """Registered name or `package.module:Class` of a plugin."""
    k: int = 4
    """Observations stacked."""

    def __post_init__(self) -> None:
        if self.k < 1:
            raise FieldError("k", f"must be at least 1, got {self.k}")


@config
class ResizeConfig(ImageWrapperConfig):
    """Images resized to `size` (area averaging when shrinking, bilinear when growing), dtype and channels kept."""

    impl: ClassVar[str] = "amago_pipe.envs.transforms:Resize"
    type: str = "resize"
    """Registered name or `package.module:Class` of a plugin."""
    size: tuple[int, int]
    """Output `[height, width]`, e.g. `[84, 84]`."""

    def __post_init__(self) -> None:
        if min(self.size) < 1:
            raise FieldError("size", f"must be two positive sizes [height, width], got {list(self.size)}")


@config
class GrayscaleConfig(ImageWrapperConfig):
    """RGB images to one luminance channel (ITU-R 601: 0.299 R + 0.587 G + 0.114 B), uint8 (H, W, 1); stacked RGB
    frames (H, W, 3k) become (H, W, k)."""

    impl: ClassVar[str] = "amago_pipe.envs.transforms:Grayscale"
    type: str = "grayscale"
    """Registered name or `package.module:Class` of a plugin."""


@config
class SuccessOnRewardConfig(WrapperConfig):
    """`info["success"]` at every step: True at the step that ends the episode (terminated) with a reward above
    `threshold`, False otherwise; for envs that pay only on success and report no flag (MiniGrid, BabyAI), so that
    reports carry a success rate. Observations and rewards are unchanged."""

    impl: ClassVar[str] = "amago_pipe.envs.transforms:SuccessOnReward"
    type: str = "success_on_reward"
    """Registered name or `package.module:Class` of a plugin."""
    threshold: float = 0.0
    """A terminating step's reward must exceed this to count as a success."""


@config
class PluginWrapperConfig(WrapperConfig):
    """A wrapper of your own: `type: package.module:Name`, called as `Name(env, **kwargs)` (a gymnasium Wrapper class
    or a function returning the wrapped env)."""

    kwargs: dict[str, Any] | None = None
    """Keyword arguments passed after the env, e.g. `{scale: 2}`."""

    def __post_init__(self) -> None:
        if ":" not in self.type:
            raise FieldError("type", f"'{self.type}' is not an import path; expected 'package.module:Name'")


for _name, _cls in (
    ("atari", "AtariConfig"),
    ("frame_stack", "FrameStackConfig"),
    ("resize", "ResizeConfig"),
    ("grayscale", "GrayscaleConfig"),
    ("success_on_reward", "SuccessOnRewardConfig"),
):
    WRAPPERS.register(_name, f"amago_pipe.config.transforms:{_cls}")


def wrapper_records(wrappers: list[WrapperConfig] | tuple[WrapperConfig, ...] | None) -> list[dict[str, Any]]:
    """The wrappers as plain JSON (every field, defaults included): what the DataSpec and exports record."""
    return [w.to_dict() for w in wrappers or ()]


def wrappers_from_records(records: list[dict[str, Any]], *, where: str) -> list[WrapperConfig]:
    """The wrapper configs of recorded `records` (a DataSpec's or an export's); ConfigError naming `where`."""
    problems = Problems()
    built = [build(WrapperConfig, record, problems, join(where, i)) for i, record in enumerate(records)]
    problems.raise_if_any()
    return built
